import numpy as np
import pytest
import tensorflow as tf

from keras_caps.datasets import holdout
from keras_caps.datasets import multi_mnist
from keras_caps.datasets import multi_mnist_pairs
from keras_caps.datasets import numpy_ops
from keras_caps.datasets import tf_data_ops
from tests.datasets import fixtures

NUM_TRAIN = 100  # holdout 10, train 90
NUM_TEST = 40
SHIFT = 6


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("multi_mnist")
    fixtures.write_idx_dataset(folder, num_train=NUM_TRAIN,
                               num_test=NUM_TEST)
    return str(folder)


def locate(digit, pool):
    """(pool index, (row shift, column shift)) of a shifted 36x36 digit."""
    rows, cols = np.nonzero(digit)
    crop = digit[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
    for index, image in enumerate(pool):
        pool_rows, pool_cols = np.nonzero(image)
        pool_crop = image[pool_rows.min():pool_rows.max() + 1,
                          pool_cols.min():pool_cols.max() + 1]
        if pool_crop.shape == crop.shape and np.array_equal(pool_crop, crop):
            return index, (rows.min() - 4 - pool_rows.min(),
                           cols.min() - 4 - pool_cols.min())
    raise AssertionError("shifted digit not found in the pool")


def check_pairs(inputs, targets, pool_images, pool_labels, shift=SHIFT):
    merged, labels = inputs["image"], inputs["label"]
    multi_hot, digits = targets["length"], targets["reconstruction"]
    assert merged.shape[1:] == (36, 36, 1) and labels.shape[1:] == (2, 10)
    assert digits.shape[1:] == (2, 36, 36, 1)
    assert merged.min() >= 0.0 and merged.max() <= 255.0
    assert digits.min() >= 0.0 and digits.max() <= 1.0
    # Two different classes.
    classes = labels.argmax(-1)
    assert np.all(classes[:, 0] != classes[:, 1])
    np.testing.assert_array_equal(labels.sum(-1), 1.0)
    np.testing.assert_array_equal(multi_hot, labels.sum(1))
    np.testing.assert_array_equal(multi_hot.sum(-1), 2.0)
    # The targets add up to the merged image before clipping.
    np.testing.assert_allclose(
        np.clip(digits.sum(1) * 255.0, 0.0, 255.0), merged, atol=1e-3)
    found = []
    for pair, pair_classes in zip(digits[..., 0] * 255.0, classes, strict=True):
        for digit, label in zip(np.round(pair).astype(np.uint8),
                                pair_classes, strict=True):
            index, offsets = locate(digit, pool_images)
            assert pool_labels[index] == label
            assert max(abs(offsets[0]), abs(offsets[1])) <= shift
            found.append((index, offsets))
    return found


def test_training_batches(data_dir):
    ds = multi_mnist.load("train", batch_size=8, data_dir=data_dir,
                          pairs_per_epoch=40)
    assert int(ds.cardinality()) == 5
    inputs, targets = ds.element_spec
    assert inputs["image"].shape == (8, 36, 36, 1)
    assert inputs["label"].shape == (8, 2, 10)
    assert targets["length"].shape == (8, 10)
    assert targets["reconstruction"].shape == (8, 2, 36, 36, 1)
    images, labels = fixtures.synthetic_digits(NUM_TRAIN)
    train, _ = holdout.holdout_indices(labels, seed=42)
    found = []
    for inputs, targets in ds.as_numpy_iterator():
        found += check_pairs(inputs, targets, images[train], labels[train])
    shifts = np.array([offsets for _, offsets in found])
    assert shifts.min() == -SHIFT and shifts.max() == SHIFT


def test_default_pairs_per_epoch(data_dir):
    ds = multi_mnist.load("train", batch_size=9, data_dir=data_dir)
    assert int(ds.cardinality()) == 10 * 90 // 9


def test_training_is_seeded_and_new_every_epoch(data_dir):
    def load(seed):
        return multi_mnist.load("train", batch_size=8, data_dir=data_dir,
                                seed=seed, pairs_per_epoch=16)

    ds = load(1)
    epoch_1 = [x["image"] for x, _ in ds.as_numpy_iterator()]
    epoch_2 = [x["image"] for x, _ in ds.as_numpy_iterator()]
    again = [x["image"] for x, _ in load(1).as_numpy_iterator()]
    other = [x["image"] for x, _ in load(2).as_numpy_iterator()]
    np.testing.assert_array_equal(np.stack(epoch_1), np.stack(again))
    assert not np.array_equal(np.stack(epoch_1), np.stack(epoch_2))
    assert not np.array_equal(np.stack(epoch_1), np.stack(other))


def test_test_set(data_dir):
    partners = 5
    ds = multi_mnist.load("test", batch_size=16, data_dir=data_dir,
                          partners_per_digit=partners)
    assert ds.element_spec[0]["image"].shape.as_list() == [None, 36, 36, 1]
    inputs, targets = fixtures.take_all(ds)
    assert len(inputs["image"]) == NUM_TEST * partners
    images, labels = fixtures.synthetic_digits(NUM_TEST, seed=1)
    found = check_pairs(inputs, targets, images, labels)
    bases = [found[2 * i] for i in range(len(found) // 2)]
    partner_digits = [found[2 * i + 1][0] for i in range(len(found) // 2)]
    for base in range(NUM_TEST):
        group = slice(base * partners, (base + 1) * partners)
        # The base digit, shifted once, then distinct partners.
        assert {bases[i] for i in range(group.start, group.stop)} == {
            bases[group.start]}
        assert bases[group.start][0] == base
        assert len(set(partner_digits[group])) == partners
    # Identical on a second call and a second pass.
    again, _ = fixtures.take_all(multi_mnist.load(
        "test", batch_size=16, data_dir=data_dir,
        partners_per_digit=partners))
    np.testing.assert_array_equal(again["image"], inputs["image"])
    second_pass, _ = fixtures.take_all(ds)
    np.testing.assert_array_equal(second_pass["image"], inputs["image"])


def test_validation_pairs_come_from_the_holdout(data_dir):
    ds = multi_mnist.load("validation", batch_size=4, data_dir=data_dir)
    inputs, targets = fixtures.take_all(ds)
    assert len(inputs["image"]) == NUM_TRAIN // 10
    images, labels = fixtures.synthetic_digits(NUM_TRAIN)
    _, held = holdout.holdout_indices(labels, seed=42)
    found = check_pairs(inputs, targets, images[held], labels[held])
    # One pair per held-out digit, that digit first.
    assert [index for index, _ in found[::2]] == list(range(len(held)))
    epoch_2, _ = fixtures.take_all(ds)
    np.testing.assert_array_equal(epoch_2["image"], inputs["image"])


def test_validation_under_the_test_protocol(data_dir):
    ds = multi_mnist.load("validation", batch_size=8, data_dir=data_dir,
                          validation="test", reconstruction=False)
    merged, multi_hot = fixtures.take_all(ds)
    assert merged.shape == (NUM_TEST, 36, 36, 1)
    assert multi_hot.shape == (NUM_TEST, 10)
    np.testing.assert_array_equal(multi_hot.sum(-1), 2.0)


def test_sabour_shift(data_dir):
    ds = multi_mnist.load("train", batch_size=16, data_dir=data_dir, shift=4,
                          pairs_per_epoch=16)
    inputs, targets = next(ds.as_numpy_iterator())
    images, labels = fixtures.synthetic_digits(NUM_TRAIN)
    check_pairs(inputs, targets, images, labels, shift=4)


def test_shifted_digits():
    images, _ = fixtures.synthetic_digits(3)
    shifts = np.array([[0, 0], [-6, 6], [3, -2]], np.int32)
    # The step written once, on each executor.
    shifted = multi_mnist_pairs.shift_digits(
        tf.constant(images), tf.constant(shifts), 6, tf_data_ops).numpy()
    np.testing.assert_array_equal(
        shifted, multi_mnist_pairs.shift_digits(images, shifts, 6,
                                                numpy_ops))
    for image, (dy, dx), out in zip(images, shifts, shifted[..., 0],
                                    strict=True):
        expected = np.zeros((36 + 24, 36 + 24))
        expected[4 + 12 + dy:32 + 12 + dy, 4 + 12 + dx:32 + 12 + dx] = image
        np.testing.assert_array_equal(out, expected[12:48, 12:48])


def test_too_many_partners(data_dir):
    with pytest.raises(ValueError, match="partners_per_digit"):
        multi_mnist.load("test", batch_size=8, data_dir=data_dir,
                         partners_per_digit=NUM_TEST)


def test_invalid_options(data_dir):
    with pytest.raises(ValueError, match="shift"):
        multi_mnist.load("train", batch_size=8, data_dir=data_dir, shift=-1)
    with pytest.raises(TypeError, match="`shift`.*Received: shift=2.0"):
        multi_mnist.load("train", batch_size=8, data_dir=data_dir, shift=2.0)
    with pytest.raises(ValueError, match="pairs_per_epoch"):
        multi_mnist.load("train", batch_size=8, data_dir=data_dir,
                         pairs_per_epoch=4)
