"""MultiMNIST from the NumPy pipeline against the tf.data one and against
the pair distribution of Sabour et al. 2017, §6 (first digit uniform, the
second uniform over the other classes' digits, shifts uniform)."""

import keras
import numpy as np
import pytest
from scipy import stats

from keras_caps.datasets import load
from keras_caps.datasets import multi_mnist_batches
from tests.datasets import fixtures

pytestmark = pytest.mark.single_backend

_ALPHA = 1e-3


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("multi")
    fixtures.write_idx_dataset(str(folder / "mnist"), num_train=60,
                               num_test=20)
    return str(folder)


def batches_of(pipeline, data_dir, split, **kwargs):
    data = load("multi_mnist", split, batch_size=8, data_dir=data_dir,
                input_pipeline=pipeline, seed=3, **kwargs)
    if pipeline == "numpy":
        assert isinstance(data, multi_mnist_batches.MultiMnistBatches)
        return [data[index] for index in range(len(data))]
    return list(data.as_numpy_iterator())


def concatenate(batches):
    return keras.tree.map_structure(lambda *parts: np.concatenate(parts),
                                    *batches)


@pytest.mark.parametrize("split,kwargs", [
    ("train", {"pairs_per_epoch": 40}), ("validation", {}),
    ("test", {"partners_per_digit": 3})])
def test_structure_matches_tf_data(data_dir, split, kwargs):
    mine = batches_of("numpy", data_dir, split, **kwargs)
    theirs = batches_of("tf_data", data_dir, split, **kwargs)
    assert len(mine) == len(theirs)
    for my_batch, their_batch in zip(mine, theirs):
        keras.tree.assert_same_structure(my_batch, their_batch)
        for my_part, their_part in zip(keras.tree.flatten(my_batch),
                                       keras.tree.flatten(their_batch)):
            assert my_part.shape == their_part.shape
            assert my_part.dtype == their_part.dtype == np.float32


def _pair_properties(batches):
    """Per pair: the two labels and each digit's shift from its ink box."""
    inputs, targets = concatenate(batches)
    labels = inputs["label"].argmax(axis=2)  # (n, 2)
    digits = targets["reconstruction"][..., 0]  # (n, 2, 36, 36)
    np.testing.assert_allclose(
        inputs["image"][..., 0], np.clip(digits.sum(axis=1) * 255, 0, 255),
        atol=1e-3)
    np.testing.assert_array_equal(targets["length"],
                                  inputs["label"].sum(axis=1))
    first_rows = np.argmax(digits.any(axis=3), axis=2)  # (n, 2)
    first_columns = np.argmax(digits.any(axis=2), axis=2)
    return labels, first_rows, first_columns


def test_pairs_follow_the_recipe_like_tf_data(data_dir):
    # The holdout's training digits: those of the TF eval-mode train split.
    pool = concatenate(list(load(
        "mnist", "train", batch_size=64, data_dir=data_dir, seed=3,
        training=False, reconstruction=False).as_numpy_iterator()))
    pool_labels = pool[1].argmax(axis=1)
    counts = np.bincount(pool_labels, minlength=10)
    kwargs = {"pairs_per_epoch": 2400}
    mine = _pair_properties(batches_of("numpy", data_dir, "train", **kwargs))
    theirs = _pair_properties(batches_of("tf_data", data_dir, "train",
                                         **kwargs))
    for labels, _, _ in (mine, theirs):
        assert np.all(labels[:, 0] != labels[:, 1])
        # P(c, c') = counts[c] / n * counts[c'] / (n - counts[c]).
        size = counts.sum()
        expected = (counts[:, None] / size) * counts[None, :] / (
            size - counts[:, None])
        np.fill_diagonal(expected, 0.0)
        observed = np.zeros((10, 10))
        np.add.at(observed, (labels[:, 0], labels[:, 1]), 1)
        keep = expected > 0
        assert stats.chisquare(
            observed[keep], expected[keep] * len(labels)).pvalue > _ALPHA
    # Where each digit's ink starts: its place in the pool digit plus its
    # shift. Same digit and shift distributions, same distribution.
    for axis in (1, 2):
        my_moves = mine[axis].reshape(-1)
        their_moves = theirs[axis].reshape(-1)
        table = np.array([np.bincount(moves, minlength=36)
                          for moves in (my_moves, their_moves)])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table).pvalue > _ALPHA


def test_shifts_are_uniform_and_digits_are_pool_digits(data_dir):
    batches = load("multi_mnist", "train", batch_size=64, data_dir=data_dir,
                   seed=3, input_pipeline="numpy", pairs_per_epoch=1280)
    shifts = np.concatenate([batches._random_pairs(0, index)[2]
                             for index in range(len(batches))])
    counts = np.bincount(shifts.reshape(-1) + 6, minlength=13)
    assert len(counts) == 13
    assert stats.chisquare(counts).pvalue > _ALPHA
    first, second, pair_shifts = batches._random_pairs(0, 0)
    _, targets = batches[0]
    # Zero-padded by 4 to 36 x 36, then by the largest shift, 6.
    padded = np.pad(batches._digits, ((0, 0), (10, 10), (10, 10)))
    for slot, indices in enumerate((first, second)):
        for row in range(4):
            dy, dx = pair_shifts[row, slot]
            # Content moves by (dy, dx): a window of the doubly padded digit.
            expected = padded[indices[row], 6 - dy:42 - dy, 6 - dx:42 - dx]
            np.testing.assert_allclose(
                targets["reconstruction"][row, slot, ..., 0],
                expected / 255.0, atol=1e-6)


def test_new_pairs_every_epoch_fixed_for_a_seed(data_dir):
    def first_batch(epochs, seed=3):
        batches = load("multi_mnist", "train", batch_size=8,
                       data_dir=data_dir, seed=seed, input_pipeline="numpy",
                       pairs_per_epoch=16)
        for _ in range(epochs):
            batches.on_epoch_end()
        return batches[0][0]["image"]

    np.testing.assert_array_equal(first_batch(1), first_batch(1))
    assert not np.array_equal(first_batch(0), first_batch(1))
    assert not np.array_equal(first_batch(0), first_batch(0, seed=4))


def test_test_pairs_are_fixed_and_drawn_without_replacement(data_dir):
    first = concatenate(batches_of("numpy", data_dir, "test",
                                   partners_per_digit=5))
    again = concatenate(batches_of("numpy", data_dir, "test",
                                   partners_per_digit=5))
    keras.tree.map_structure(np.testing.assert_array_equal, first, again)
    digits = first[1]["reconstruction"][..., 0]  # (100, 2, 36, 36)
    labels = first[0]["label"].argmax(axis=2)
    assert len(labels) == 20 * 5
    for base in range(20):
        pairs = slice(5 * base, 5 * base + 5)
        # The base digit, shifted once, in all its pairs.
        np.testing.assert_array_equal(digits[pairs, 0],
                                      np.repeat(digits[5 * base:5 * base + 1,
                                                       0], 5, axis=0))
        partners = {digit.tobytes() for digit in digits[pairs, 1]}
        assert len(partners) == 5  # without replacement (all distinct)
        assert np.all(labels[pairs, 1] != labels[pairs, 0])


def test_bad_arguments(data_dir):
    with pytest.raises(ValueError, match="`partners_per_digit`: the 'test' "
                       "digits of some class have only 18"):
        load("multi_mnist", "test", batch_size=8, data_dir=data_dir,
             input_pipeline="numpy", partners_per_digit=19)
    with pytest.raises(ValueError, match="must hold at least one batch"):
        load("multi_mnist", "train", batch_size=8, data_dir=data_dir,
             input_pipeline="numpy", pairs_per_epoch=4)
    with pytest.raises(ValueError, match="`shift`, expected a non-negative"):
        load("multi_mnist", "train", batch_size=8, data_dir=data_dir,
             input_pipeline="numpy", shift=-1)
