import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps.datasets import mnist
from keras_caps.datasets import sources
from tests.datasets import fixtures

NUM_TRAIN = 200  # holdout 20, train 180
NUM_TEST = 50


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mnist")
    fixtures.write_idx_dataset(folder, num_train=NUM_TRAIN,
                               num_test=NUM_TEST)
    return str(folder)


def test_training_element_spec(data_dir):
    ds = mnist.load("train", batch_size=16, data_dir=data_dir)
    inputs, targets = ds.element_spec
    assert inputs["image"].shape == (16, 28, 28, 1)
    assert inputs["label"].shape == (16, 10)
    assert targets["length"].shape == (16, 10)
    assert targets["reconstruction"].shape == (16, 28, 28, 1)
    for spec in (*inputs.values(), *targets.values()):
        assert spec.dtype == tf.float32
    assert int(ds.cardinality()) == 180 // 16


def test_training_batches(data_dir):
    ds = mnist.load("train", batch_size=16, data_dir=data_dir)
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == 180 // 16
    for inputs, targets in batches:
        image, label = inputs["image"], inputs["label"]
        assert image.shape == (16, 28, 28, 1)
        assert image.min() >= 0.0 and image.max() <= 255.0
        assert image.max() > 1.0  # raw pixels, not scaled
        np.testing.assert_array_equal(label.sum(axis=1), 1.0)
        assert set(np.unique(label)) <= {0.0, 1.0}
        np.testing.assert_array_equal(targets["length"], label)
        np.testing.assert_allclose(targets["reconstruction"], image / 255.0,
                                   rtol=1e-6)


def test_evaluation_yields_the_raw_split(data_dir):
    test_images, test_labels = fixtures.synthetic_digits(NUM_TEST, seed=1)
    ds = mnist.load("test", batch_size=16, data_dir=data_dir,
                    reconstruction=False)
    assert ds.element_spec[0].shape.as_list() == [None, 28, 28, 1]
    images, labels = fixtures.take_all(ds)
    # Not shuffled, not augmented, last partial batch kept.
    np.testing.assert_array_equal(images[..., 0], test_images)
    np.testing.assert_array_equal(labels.argmax(1), test_labels)


@pytest.mark.parametrize("validation, sizes", [
    ("holdout", (180, 20, 50)), ("test", (200, 50, 50))])
def test_split_sizes(data_dir, validation, sizes):
    for split, size in zip(("train", "validation", "test"), sizes, strict=True):
        ds = mnist.load(split, batch_size=1000, training=False,
                        data_dir=data_dir, validation=validation,
                        reconstruction=False)
        images, _ = fixtures.take_all(ds)
        assert len(images) == size, split


def test_holdout_is_stratified_and_disjoint(data_dir):
    def images_of(split):
        ds = mnist.load(split, batch_size=64, training=False,
                        data_dir=data_dir, reconstruction=False)
        return fixtures.take_all(ds)

    train_images, _ = images_of("train")
    held_images, held_labels = images_of("validation")
    np.testing.assert_array_equal(
        np.bincount(held_labels.argmax(1), minlength=10), [2] * 10)
    train_keys = {image.tobytes() for image in train_images}
    assert not any(image.tobytes() in train_keys for image in held_images)


def test_deterministic_given_seed(data_dir):
    def first_batches(seed):
        ds = mnist.load("train", batch_size=16, data_dir=data_dir, seed=seed)
        return [batch[0]["image"] for batch in ds.take(3).as_numpy_iterator()]

    first, again, other = first_batches(1), first_batches(1), first_batches(2)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])


def test_reshuffles_and_reaugments_every_epoch(data_dir):
    ds = mnist.load("train", batch_size=16, data_dir=data_dir)
    epoch_1 = next(iter(ds))[0]["image"].numpy()
    epoch_2 = next(iter(ds))[0]["image"].numpy()
    assert not np.array_equal(epoch_1, epoch_2)


def test_augmentation_changes_images(data_dir):
    plain = mnist.load("train", batch_size=16, data_dir=data_dir,
                       augment=False, reconstruction=False)
    augmented = mnist.load("train", batch_size=16, data_dir=data_dir,
                           reconstruction=False)
    (plain_images, plain_labels), = plain.take(1).as_numpy_iterator()
    (images, labels), = augmented.take(1).as_numpy_iterator()
    np.testing.assert_array_equal(labels, plain_labels)  # same shuffle
    assert np.all(np.any(images != plain_images, axis=(1, 2, 3)))
    assert images.min() >= 0.0 and images.max() <= 255.0
    # Augmentation moves pixels; it does not rescale them.
    assert images.max() > 200.0


def test_training_flag_overrides_the_split(data_dir):
    ds = mnist.load("test", batch_size=16, training=True, data_dir=data_dir)
    assert ds.element_spec[0]["image"].shape == (16, 28, 28, 1)
    assert int(ds.cardinality()) == NUM_TEST // 16


def test_reads_the_environment_variable(data_dir, monkeypatch):
    monkeypatch.setenv(sources.DATA_DIR_ENV, data_dir)
    ds = mnist.load("test", batch_size=64, reconstruction=False)
    assert int(ds.cardinality()) == 1


def test_mnist_subfolder_is_preferred(tmp_path):
    fixtures.write_idx_dataset(tmp_path / "mnist", num_train=30,
                               num_test=20)
    ds = mnist.load("test", batch_size=64, data_dir=str(tmp_path))
    images = fixtures.take_all(ds)[0]["image"]
    assert len(images) == 20


def test_tfds_source(monkeypatch):
    with tfds.testing.mock_data(num_examples=40):
        ds = mnist.load("train", batch_size=8, seed=0)
        (inputs, targets), = ds.take(1).as_numpy_iterator()
    assert inputs["image"].shape == (8, 28, 28, 1)
    assert inputs["label"].shape == (8, 10)
    assert inputs["image"].min() >= 0 and inputs["image"].max() <= 255
    assert int(ds.cardinality()) == 36 // 8


def test_invalid_arguments(data_dir):
    with pytest.raises(ValueError, match="split"):
        mnist.load("training", batch_size=8, data_dir=data_dir)
    with pytest.raises(ValueError, match="batch_size"):
        mnist.load("train", batch_size=0, data_dir=data_dir)
    with pytest.raises(ValueError, match="validation"):
        mnist.load("train", batch_size=8, data_dir=data_dir,
                   validation="official")
    with pytest.raises(TypeError, match="seed"):
        mnist.load("train", batch_size=8, data_dir=data_dir, seed=None)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="tf.distribute needs the TensorFlow backend")
def test_fit_under_a_distribution_strategy(data_dir):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    ds = mnist.load("train", batch_size=16, data_dir=data_dir,
                    reconstruction=False)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(), keras.layers.Dense(10)])
        model.compile(optimizer="sgd",
                      loss=keras.losses.CategoricalCrossentropy(
                          from_logits=True))
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    assert np.all(np.isfinite(history.history["loss"]))


REAL_DIR = os.environ.get(sources.DATA_DIR_ENV)


@pytest.mark.skipif(
    not REAL_DIR, reason=f"set {sources.DATA_DIR_ENV} to a folder with the "
    "real MNIST IDX files to run this test")
def test_real_mnist_counts():
    sizes = {}
    for split in ("train", "validation", "test"):
        ds = mnist.load(split, batch_size=1000, training=False,
                        data_dir=REAL_DIR, reconstruction=False)
        sizes[split] = int(ds.cardinality())
    assert sizes == {"train": 54, "validation": 6, "test": 10}
    _, labels = fixtures.take_all(
        mnist.load("validation", batch_size=1000, data_dir=REAL_DIR,
                   reconstruction=False))
    assert labels.shape == (6000, 10)
    counts = np.bincount(labels.argmax(1), minlength=10)
    assert counts.min() >= 542 and counts.max() <= 675  # 10 % per class


def test_shift_augmentation_translates_by_at_most_two_pixels(data_dir):
    plain = mnist.load("train", batch_size=16, data_dir=data_dir,
                       augment=False, reconstruction=False)
    shifted = mnist.load("train", batch_size=16, data_dir=data_dir,
                         augmentation="shift", reconstruction=False)
    (plain_images, plain_labels), = plain.take(1).as_numpy_iterator()
    (images, labels), = shifted.take(1).as_numpy_iterator()
    np.testing.assert_array_equal(labels, plain_labels)  # same shuffle
    seen = set()
    for original, image in zip(plain_images[..., 0], images[..., 0],
                               strict=True):
        # The synthetic digits have empty margins, so exactly one integer
        # shift in [-2, 2]^2 (zero fill) reproduces each shifted image.
        padded = np.pad(original, 2)
        matches = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)
                   if np.array_equal(
                       padded[2 - dy:30 - dy, 2 - dx:30 - dx], image)]
        assert len(matches) == 1
        seen.add(matches[0])
    assert len(seen) > 1


def test_shift_random_shift_fills_zeros():
    images = np.full((3, 28, 28, 1), 7.0, np.float32)
    shifted = mnist.random_shift(images, seed=(0, 1)).numpy()
    assert shifted.shape == images.shape
    assert set(np.unique(shifted)) <= {0.0, 7.0}
    # At most 2 rows and 2 columns of zeros come in.
    assert np.all(shifted[:, 2:26, 2:26] == 7.0)


def test_unknown_augmentation_raises(data_dir):
    with pytest.raises(ValueError, match="`augmentation`.*'efficient_capsnet'"
                       ".*'shift'.*Received: augmentation='flip'"):
        mnist.load("train", batch_size=16, data_dir=data_dir,
                   augmentation="flip")
