import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps.datasets import holdout
from keras_caps.datasets import smallnorb
from tests.datasets import fixtures

NUM_EXAMPLES = 30  # per split under mock_data: holdout 3, train 27


@pytest.fixture(autouse=True)
def mock_smallnorb():
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        yield


def raw_split(split):
    """The mocked examples as NumPy arrays: (96, 96, 2) uint8 pairs."""
    examples = tfds.load("smallnorb", split=split, download=False,
                         shuffle_files=False)
    images, labels = [], []
    for example in examples.as_numpy_iterator():
        images.append(np.concatenate([example["image"], example["image2"]],
                                     axis=-1))
        labels.append(example["label_category"])
    return np.stack(images), np.array(labels)


def test_training_batches():
    ds = smallnorb.load("train", batch_size=4)
    assert int(ds.cardinality()) == 27 // 4
    inputs, targets = ds.element_spec
    assert inputs["image"].shape == (4, 48, 48, 2)
    assert inputs["label"].shape == (4, 5)
    assert targets["reconstruction"].shape == (4, 48, 48, 2)
    for inputs, targets in ds.take(2).as_numpy_iterator():
        np.testing.assert_array_equal(inputs["label"].sum(-1), 1.0)
        np.testing.assert_array_equal(targets["length"], inputs["label"])
        np.testing.assert_allclose(
            targets["reconstruction"],
            np.clip(inputs["image"] / 255.0, 0.0, 1.0), rtol=1e-6)
        assert targets["reconstruction"].min() >= 0.0
        assert targets["reconstruction"].max() <= 1.0


def test_evaluation_is_the_resized_centre_crop():
    images, labels = raw_split("test")
    ds = smallnorb.load("test", batch_size=8, reconstruction=False)
    assert ds.element_spec[0].shape.as_list() == [None, 48, 48, 2]
    crops, one_hot = fixtures.take_all(ds)
    expected = tf.image.resize(images.astype("float32"), (64, 64),
                               method="bilinear").numpy()[:, 8:56, 8:56]
    np.testing.assert_allclose(crops, expected, atol=1e-4)
    np.testing.assert_array_equal(one_hot.argmax(-1), labels)
    assert crops.min() >= 0.0 and crops.max() <= 255.0


@pytest.mark.parametrize("validation, sizes", [
    ("holdout", (27, 3, 30)), ("test", (30, 30, 30))])
def test_split_sizes(validation, sizes):
    for split, size in zip(("train", "validation", "test"), sizes, strict=True):
        ds = smallnorb.load(split, batch_size=64, training=False,
                            validation=validation, reconstruction=False)
        assert int(ds.cardinality()) == 1
        assert len(fixtures.take_all(ds)[0]) == size, split


def test_holdout_examples():
    _, labels = raw_split("train")
    _, held = holdout.holdout_indices(labels, seed=42)
    ds = smallnorb.load("validation", batch_size=64, reconstruction=False)
    _, one_hot = fixtures.take_all(ds)
    np.testing.assert_array_equal(one_hot.argmax(-1), labels[held])


def test_training_statistics():
    images, labels = raw_split("train")
    train, _ = holdout.holdout_indices(labels, seed=42)
    mean, variance = smallnorb.training_statistics()
    assert mean.shape == (2,) and variance.shape == (2,)
    pixels = images[train].reshape(-1, 2).astype("float64")
    np.testing.assert_allclose(mean, pixels.mean(0), rtol=1e-5)
    np.testing.assert_allclose(variance, pixels.var(0), rtol=1e-4)
    full_mean, _ = smallnorb.training_statistics(validation="test")
    np.testing.assert_allclose(
        full_mean, images.reshape(-1, 2).astype("float64").mean(0),
        rtol=1e-5)


def test_augmentation():
    statistics = (np.array([100.0, 100.0]), np.array([400.0, 400.0]))
    plain = smallnorb.load("train", batch_size=4, augment=False,
                           reconstruction=False)
    augmented = smallnorb.load("train", batch_size=4, reconstruction=False,
                               statistics=statistics)
    (plain_images, plain_labels), = plain.take(1).as_numpy_iterator()
    (images, labels), = augmented.take(1).as_numpy_iterator()
    np.testing.assert_array_equal(labels, plain_labels)  # same shuffle
    assert images.shape == plain_images.shape == (4, 48, 48, 2)
    assert np.all(np.any(images != plain_images, axis=(1, 2, 3)))
    # Brightness shifts each image by at most 2 std (= 40 here) and
    # contrast scales it about its mean by 0.5 to 1.5.
    ratio = images.std(axis=(1, 2)) / plain_images.std(axis=(1, 2))
    assert np.all(ratio > 0.3) and np.all(ratio < 1.7)


def test_deterministic_given_seed():
    statistics = (np.zeros(2), np.ones(2))

    def first_batch(seed):
        ds = smallnorb.load("train", batch_size=4, seed=seed,
                            statistics=statistics, reconstruction=False)
        return next(ds.as_numpy_iterator())[0]

    np.testing.assert_array_equal(first_batch(3), first_batch(3))
    assert not np.array_equal(first_batch(3), first_batch(4))

