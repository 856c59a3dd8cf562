import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_caps.datasets import DATASETS
from keras_caps.datasets import cifar
from keras_caps.datasets import holdout
from keras_caps.datasets import load
from tests.datasets import fixtures

NUM_EXAMPLES = 30  # per split under mock_data: holdout 3, train 27


@pytest.fixture(autouse=True)
def mock_cifar():
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        yield


def raw_split(dataset, split):
    """The mocked examples as NumPy arrays: (32, 32, 3) uint8 images."""
    examples = tfds.load(dataset, split=split, download=False,
                         shuffle_files=False, as_supervised=True)
    images, labels = zip(*examples.as_numpy_iterator())
    return np.stack(images), np.array(labels)


@pytest.mark.parametrize("dataset, num_classes", [("cifar10", 10),
                                                  ("cifar100", 100)])
def test_training_batches(dataset, num_classes):
    ds = load(dataset, "train", batch_size=4)
    assert int(ds.cardinality()) == 27 // 4
    inputs, targets = ds.element_spec
    assert inputs["image"].shape == (4, 32, 32, 3)
    assert inputs["image"].dtype == "float32"
    assert inputs["label"].shape == (4, num_classes)
    assert targets["reconstruction"].shape == (4, 32, 32, 3)
    assert DATASETS[dataset].input_shape == (32, 32, 3)
    assert DATASETS[dataset].num_classes == num_classes
    for inputs, targets in ds.take(2).as_numpy_iterator():
        np.testing.assert_array_equal(inputs["label"].sum(-1), 1.0)
        np.testing.assert_array_equal(targets["length"], inputs["label"])
        assert inputs["image"].min() >= 0.0
        assert inputs["image"].max() <= 255.0
        np.testing.assert_allclose(targets["reconstruction"],
                                   inputs["image"] / 255.0, rtol=1e-6)


def test_evaluation_is_the_raw_images():
    images, labels = raw_split("cifar100", "test")
    ds = cifar.load_cifar100("test", batch_size=8, reconstruction=False)
    assert ds.element_spec[0].shape.as_list() == [None, 32, 32, 3]
    assert ds.element_spec[1].shape.as_list() == [None, 100]
    loaded, one_hot = fixtures.take_all(ds)
    np.testing.assert_array_equal(loaded, images.astype("float32"))
    np.testing.assert_array_equal(one_hot.argmax(-1), labels)


@pytest.mark.parametrize("validation, sizes", [
    ("holdout", (27, 3, 30)), ("test", (30, 30, 30))])
def test_split_sizes(validation, sizes):
    for split, size in zip(("train", "validation", "test"), sizes,
                           strict=True):
        ds = cifar.load_cifar10(split, batch_size=64, training=False,
                                validation=validation, reconstruction=False)
        assert int(ds.cardinality()) == 1
        assert len(fixtures.take_all(ds)[0]) == size, split


def test_holdout_examples_are_stratified_and_seeded():
    images, labels = raw_split("cifar10", "train")
    train, held = holdout.holdout_indices(labels, seed=42)
    ds = cifar.load_cifar10("validation", batch_size=64,
                            reconstruction=False)
    loaded, one_hot = fixtures.take_all(ds)
    np.testing.assert_array_equal(one_hot.argmax(-1), labels[held])
    np.testing.assert_array_equal(loaded, images[held].astype("float32"))
    other = fixtures.take_all(cifar.load_cifar10(
        "validation", batch_size=64, seed=7, reconstruction=False))[0]
    _, held_7 = holdout.holdout_indices(labels, seed=7)
    np.testing.assert_array_equal(other, images[held_7].astype("float32"))


def test_augmentation_crops_and_flips():
    plain = cifar.load_cifar10("train", batch_size=8, augment=False,
                               reconstruction=False)
    augmented = cifar.load_cifar10("train", batch_size=8,
                                   reconstruction=False)
    (plain_images, plain_labels), = plain.take(1).as_numpy_iterator()
    (images, labels), = augmented.take(1).as_numpy_iterator()
    np.testing.assert_array_equal(labels, plain_labels)  # same shuffle
    assert images.shape == plain_images.shape == (8, 32, 32, 3)
    assert not np.array_equal(images, plain_images)
    # Every augmented image is a (possibly mirrored) 32x32 window of its
    # image zero-padded by 4 pixels.
    for image, source in zip(images, plain_images, strict=True):
        padded = np.pad(source, ((4, 4), (4, 4), (0, 0)))
        windows = [padded[top:top + 32, left:left + 32]
                   for top in range(9) for left in range(9)]
        windows += [window[:, ::-1] for window in windows]
        assert any(np.array_equal(image, window) for window in windows)


def test_deterministic_given_seed():
    def first_batch(seed):
        ds = cifar.load_cifar10("train", batch_size=4, seed=seed,
                                reconstruction=False)
        return next(ds.as_numpy_iterator())[0]

    np.testing.assert_array_equal(first_batch(3), first_batch(3))
    assert not np.array_equal(first_batch(3), first_batch(4))


def test_bad_arguments():
    with pytest.raises(ValueError, match="Received: dataset='cifar'"):
        cifar.load("cifar", "train", batch_size=4)
    with pytest.raises(TypeError, match="Received: augment='yes'"):
        cifar.load_cifar10("train", batch_size=4, augment="yes")
    with pytest.raises(ValueError, match="Received: options="):
        load("cifar10", "train", batch_size=4, statistics=None)
