import numpy as np
import pytest

from keras_caps.datasets import holdout

# The class counts of MNIST's training split.
MNIST_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def mnist_like_labels():
    labels = np.repeat(np.arange(10), MNIST_COUNTS)
    return np.random.default_rng(0).permutation(labels)


def test_mnist_sizes_and_stratification():
    labels = mnist_like_labels()
    train, held = holdout.holdout_indices(labels, seed=42)
    assert len(held) == 6000 and len(train) == 54000
    held_counts = np.bincount(labels[held], minlength=10)
    np.testing.assert_allclose(held_counts, 0.1 * np.array(MNIST_COUNTS),
                               atol=1.0)


def test_smallnorb_sizes():
    labels = np.tile(np.arange(5), 4860)
    train, held = holdout.holdout_indices(labels, seed=42)
    assert len(held) == 2430 and len(train) == 21870
    np.testing.assert_array_equal(np.bincount(labels[held]), [486] * 5)


def test_partition_without_overlap():
    labels = mnist_like_labels()[:1000]
    train, held = holdout.holdout_indices(labels, seed=3)
    assert not set(train.tolist()) & set(held.tolist())
    np.testing.assert_array_equal(np.sort(np.concatenate([train, held])),
                                  np.arange(1000))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(held) > 0)


def test_deterministic_given_seed():
    labels = mnist_like_labels()[:2000]
    first = holdout.holdout_indices(labels, seed=7)
    second = holdout.holdout_indices(labels, seed=7)
    other = holdout.holdout_indices(labels, seed=8)
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[1], other[1])


@pytest.mark.parametrize("validation", ["holdout", "test"])
def test_select_split(validation):
    labels = np.arange(100) % 10
    images = np.arange(100)
    arrays = {"train": (images, labels),
              "test": (images[:30] + 1000, labels[:30])}
    train = holdout.select_split(arrays, "train", validation, seed=1)
    held = holdout.select_split(arrays, "validation", validation, seed=1)
    test = holdout.select_split(arrays, "test", validation, seed=1)
    assert np.all(test[0] >= 1000)
    if validation == "holdout":
        assert len(train[0]) == 90 and len(held[0]) == 10
        assert not set(train[0].tolist()) & set(held[0].tolist())
        np.testing.assert_array_equal(np.bincount(held[1]), [1] * 10)
    else:
        assert len(train[0]) == 100
        np.testing.assert_array_equal(held[0], test[0])
