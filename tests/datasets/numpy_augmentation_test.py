"""The NumPy augmentation against the tf.data one and against the paper's
distributions (Mazzia et al. 2021, `utils/pre_process_mnist.py`).

Draws: the NumPy and TensorFlow generators differ, so the two versions are
compared in distribution: each against the exact probabilities implied by
the official recipe (normal CDFs from SciPy), and against each other (two-
sample tests), over 20,000 draws at fixed seeds. Pixels: fed the same
draws, the two versions agree within float rounding.
"""

import functools

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from keras_caps.datasets import augmentation
from keras_caps.datasets import augmentation_parameters
from keras_caps.datasets import augmentation_steps as steps
from keras_caps.datasets import numpy_augmentation
from keras_caps.datasets import numpy_ops
from keras_caps.datasets import tf_data_ops
from tests.datasets import fixtures

pytestmark = pytest.mark.single_backend

# The steps of `augmentation_steps` on each executor.
margin_shift = functools.partial(steps.margin_shift, ops=numpy_ops)
rotate_by = functools.partial(steps.rotate_by, ops=numpy_ops)
roll = functools.partial(steps.roll, ops=numpy_ops)
squish = functools.partial(steps.squish, ops=numpy_ops)
erase = functools.partial(steps.erase, ops=numpy_ops)


def tf_step(step, *arrays):
    """`step` of `augmentation_steps` on the `tf.data` executor."""
    return step(*[tf.constant(array) for array in arrays],
                ops=tf_data_ops).numpy()


_DRAWS = 20000
_SIGMA = 0.33
# A p-value below this rejects; at a fixed seed the tests are deterministic.
_ALPHA = 1e-3


def digits(num_examples=64, seed=0):
    images, _ = fixtures.synthetic_digits(num_examples, seed)
    return images.astype("float32")[..., None]


def numpy_draws(seed=0, size=_DRAWS):
    return numpy_augmentation.draw_parameters(size,
                                              np.random.default_rng(seed))


def tf_draws(seed=(3, 4), size=_DRAWS):
    draws = augmentation.draw_parameters(size, seed)
    return {key: value.numpy() for key, value in draws.items()}


def _interval(low, high):
    """P(low <= N(0, 0.33) < high)."""
    return stats.norm.cdf(high / _SIGMA) - stats.norm.cdf(low / _SIGMA)


def degree_probabilities():
    """P(degrees = k), k = -29..29: `int(30 r0)` when `r1 <= 0`, r0
    clipped to +-0.9999 (so +-29 take the tails)."""
    probabilities = {}
    for k in range(-29, 30):
        if k == 0:
            truncates = _interval(-1 / 30, 1 / 30)
            probabilities[k] = 0.5 + 0.5 * truncates
        elif k > 0:
            high = np.inf if k == 29 else (k + 1) / 30
            probabilities[k] = 0.5 * _interval(k / 30, high)
        else:
            low = -np.inf if k == -29 else (k - 1) / 30
            probabilities[k] = 0.5 * _interval(low, k / 30)
    return probabilities


def width_cut_probabilities():
    """P(w = k), k = 1..7: `floor(7 min(|r|, 0.9999)) + 1`."""
    return {k: 2 * _interval((k - 1) / 7, np.inf if k == 7 else k / 7)
            for k in range(1, 8)}


def goodness_of_fit(values, probabilities):
    """p-value of a chi-square test of `values` against `{value: p}`."""
    keys = sorted(probabilities)
    observed = np.array([np.sum(values == key) for key in keys])
    assert observed.sum() == len(values), "values outside the support"
    expected = np.array([probabilities[key] for key in keys]) * len(values)
    # Merge the sparse tails so every expected count is at least 5.
    keep = expected >= 5
    if not keep.all():
        observed = np.append(observed[keep], observed[~keep].sum())
        expected = np.append(expected[keep], expected[~keep].sum())
    expected *= observed.sum() / expected.sum()
    return stats.chisquare(observed, expected).pvalue


def two_sample(first, second):
    """p-value of a chi-square test that two discrete samples agree."""
    keys = np.union1d(first, second)
    table = np.array([[np.sum(sample == key) for key in keys]
                      for sample in (first, second)])
    table = table[:, table.sum(axis=0) >= 10]
    return stats.chi2_contingency(table).pvalue


@pytest.mark.parametrize("draw", [numpy_draws, tf_draws],
                         ids=["numpy", "tf"])
def test_draws_follow_the_official_distributions(draw):
    draws = draw()
    assert goodness_of_fit(draws["degrees"], degree_probabilities()) > _ALPHA
    assert goodness_of_fit(draws["squish_width_cut"],
                           width_cut_probabilities()) > _ALPHA
    extra_one = 2 * _interval(0.5, np.inf)  # floor(2 |r|) == 1
    assert goodness_of_fit(draws["squish_offset_extra"],
                           {0: 1 - extra_one, 1: extra_one}) > _ALPHA
    corners = draws["erase_corners"]
    uniform = {k: 1 / 19 for k in range(4, 23)}
    for axis in (0, 1):
        assert goodness_of_fit(corners[:, axis], uniform) > _ALPHA
    for axis in ("row", "column"):
        assert goodness_of_fit(draws[f"{axis}_towards_end"].astype(int),
                               {0: 0.5, 1: 0.5}) > _ALPHA
        # |N(0, 0.33)| capped at 0.9999 (a 0.2 % tail).
        amounts = draws[f"{axis}_amount"]
        assert amounts.min() >= 0.0 and amounts.max() <= 0.9999
        half_normal = stats.halfnorm(scale=_SIGMA).cdf
        assert stats.kstest(amounts, half_normal).pvalue > _ALPHA
    # The ranges the official code reaches.
    assert draws["degrees"].min() == -29 and draws["degrees"].max() == 29
    assert set(np.unique(draws["squish_width_cut"])) == set(range(1, 8))
    assert corners.min() == 4 and corners.max() == 22


def test_numpy_and_tf_draws_agree():
    mine, theirs = numpy_draws(seed=1), tf_draws(seed=(5, 6))
    for key in ("degrees", "squish_width_cut", "squish_offset_extra"):
        assert two_sample(mine[key], theirs[key]) > _ALPHA, key
    for axis in (0, 1):
        assert two_sample(mine["erase_corners"][:, axis],
                          theirs["erase_corners"][:, axis]) > _ALPHA
    for key in ("row_amount", "column_amount"):
        assert stats.ks_2samp(mine[key], theirs[key]).pvalue > _ALPHA, key
    for key in ("degrees", "row_amount", "squish_width_cut"):
        assert abs(mine[key].mean() - theirs[key].mean()) < 0.05 * max(
            1.0, theirs[key].std())
        assert mine[key].std() == pytest.approx(theirs[key].std(), rel=0.05)


def test_the_tests_catch_a_wrong_parameter(monkeypatch):
    # sigma 0.30 instead of 0.33: the degree and squish tests must reject.
    monkeypatch.setattr(augmentation_parameters, "STDDEV", 0.30)
    draws = numpy_draws()
    assert goodness_of_fit(draws["degrees"], degree_probabilities()) < _ALPHA
    assert goodness_of_fit(draws["squish_width_cut"],
                           width_cut_probabilities()) < _ALPHA
    assert stats.kstest(draws["row_amount"], stats.halfnorm(
        scale=_SIGMA).cdf).pvalue < _ALPHA


def test_realised_shifts_agree_on_the_same_digits():
    images = digits(2000)
    mine = numpy_draws(seed=2, size=len(images))
    theirs = tf_draws(seed=(7, 8), size=len(images))

    def realised(draws):
        rows = margin_shift(
            images[..., 0].sum(axis=2) > 0, draws["row_towards_end"],
            draws["row_amount"])
        columns = margin_shift(
            images[..., 0].sum(axis=1) > 0, draws["column_towards_end"],
            draws["column_amount"])
        return rows, columns

    for mine_shift, their_shift in zip(realised(mine), realised(theirs)):
        assert two_sample(mine_shift, their_shift) > _ALPHA
        assert mine_shift.min() < 0 < mine_shift.max()


def test_augmented_images_agree_in_distribution():
    images = digits(2000)
    mine = numpy_augmentation.augment_mnist(images,
                                            np.random.default_rng(3))
    theirs = augmentation.augment_mnist(images, seed=(9, 10)).numpy()
    columns = np.arange(28)

    def summaries(batch):
        mass = batch[..., 0].sum(axis=(1, 2))
        centroid = (batch[..., 0].sum(axis=1) * columns).sum(1) / mass
        return mass, centroid

    for mine_summary, their_summary in zip(summaries(mine),
                                           summaries(theirs)):
        assert stats.ks_2samp(mine_summary, their_summary).pvalue > _ALPHA


def test_same_draws_same_pixels():
    images = digits(256)
    draws = numpy_draws(seed=4, size=len(images))
    mine = numpy_augmentation.apply_parameters(images, draws)
    theirs = augmentation.apply_parameters(images, draws).numpy()
    assert mine.dtype == np.float32 and mine.shape == images.shape
    np.testing.assert_allclose(mine, theirs, atol=1e-2)
    assert not np.allclose(mine, images)
    # The TF module's own draws, applied with NumPy: its augment_mnist.
    tf_parameters = augmentation.draw_parameters(len(images), (1, 2))
    np.testing.assert_allclose(
        numpy_augmentation.apply_parameters(
            images, {k: v.numpy() for k, v in tf_parameters.items()}),
        augmentation.augment_mnist(images, seed=(1, 2)).numpy(), atol=1e-2)


@pytest.mark.parametrize("degrees", [-29.0, -17.0, 5.0, 29.0, 90.0])
def test_rotation_matches_tf(degrees):
    images = digits(8)
    angles = np.full(len(images), degrees, np.float32)
    np.testing.assert_allclose(
        rotate_by(images, angles),
        tf_step(steps.rotate_by, images, angles),
        atol=1e-2)


def test_rotation_by_zero_is_the_identity():
    images = digits(4)
    np.testing.assert_array_equal(
        rotate_by(images, np.zeros(4)), images)


def test_rotation_by_90_degrees_is_a_transpose():
    # Counter-clockwise about (14, 14): out[y, x] = in[x, 28 - y].
    image = digits(1)
    out = rotate_by(image, np.array([90.0]))[0, ..., 0]
    np.testing.assert_allclose(out[1:], image[0, :, :0:-1, 0].T, atol=1e-3)


def test_shift_squish_and_erase_match_tf():
    images = digits(64)
    draws = numpy_draws(seed=5, size=len(images))
    towards_end = np.stack([draws["row_towards_end"],
                            draws["column_towards_end"]], 1)
    amounts = np.stack([draws["column_amount"], draws["row_amount"]], 1)
    rows = margin_shift(
        images[..., 0].sum(axis=2) > 0, towards_end[:, 0], amounts[:, 1])
    columns = margin_shift(
        images[..., 0].sum(axis=1) > 0, towards_end[:, 1], amounts[:, 0])
    np.testing.assert_array_equal(roll(images, rows, columns),
                                  tf_step(steps.roll, images, rows, columns))
    np.testing.assert_array_equal(rows, tf_step(
        steps.margin_shift, images[..., 0].sum(axis=2) > 0,
        towards_end[:, 0], amounts[:, 1]))
    cut, extra = draws["squish_width_cut"], draws["squish_offset_extra"]
    np.testing.assert_allclose(squish(images, cut, extra),
                               tf_step(steps.squish, images, cut, extra),
                               atol=1e-3)
    corners = draws["erase_corners"]
    np.testing.assert_array_equal(erase(images, corners),
                                  tf_step(steps.erase, images, corners))


def test_roll_and_erase_by_hand():
    image = np.arange(28 * 28, dtype=np.float32).reshape(1, 28, 28, 1)
    rolled = roll(image, np.array([3]), np.array([-2]))
    np.testing.assert_array_equal(rolled[0, ..., 0],
                                  np.roll(image[0, ..., 0], (3, -2), (0, 1)))
    erased = erase(image, np.array([[22, 4]]))[0, ..., 0]
    assert np.all(erased[22:26, 4:8] == 0)
    assert np.count_nonzero(erased == 0) == 17  # and pixel 0, 0 already
    assert erased[21, 4] == image[0, 21, 4, 0]


@pytest.mark.parametrize("output_size", [21, 27, 40])
def test_lanczos_matrix_matches_tf_resize(output_size):
    signals = np.random.default_rng(0).uniform(
        0, 255, (5, 28)).astype(np.float32)
    matrix = augmentation_parameters.lanczos3_resize_matrix(28,
                                                            output_size)
    theirs = tf.image.resize(signals[:, None, :, None], [1, output_size],
                             method="lanczos3", antialias=True)
    np.testing.assert_allclose(signals @ matrix.T,
                               theirs.numpy()[:, 0, :, 0], atol=1e-3)


def test_shared_operators_match_tf_resize():
    # What the tf.data version computed with tf.image.resize before the
    # operators moved to NumPy (augmentation_test checks the placement).
    operators = augmentation_parameters.squish_operators()
    identity = tf.eye(28)[:, :, None]
    for width_cut in range(1, 8):
        resized = tf.image.resize(identity, [28, 28 - width_cut],
                                  method="lanczos3",
                                  antialias=True).numpy()[:, :, 0]
        for extra in (0, 1):
            offset = width_cut // 2 + extra
            stop = min(offset + 28 - width_cut, 28)
            np.testing.assert_allclose(
                operators[2 * (width_cut - 1) + extra][offset:stop],
                resized.T[:stop - offset], atol=1e-6)


def test_random_shift_moves_within_two_pixels():
    images = digits(500)
    out = numpy_augmentation.random_shift(images, np.random.default_rng(0))
    seen = set()
    for before, after in zip(images[..., 0], out[..., 0]):
        rows, cols = np.nonzero(before)
        new_rows, new_cols = np.nonzero(after)
        shift = (new_rows.min() - rows.min(), new_cols.min() - cols.min())
        # The digits sit inside rows/cols [6, 22): nothing leaves the frame.
        np.testing.assert_array_equal(np.roll(before, shift, (0, 1)), after)
        seen.add(shift)
    assert seen == {(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)}


def test_shift_with_zero_fill_drops_what_leaves():
    image = np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4, 1)
    out = numpy_augmentation.shift_with_zero_fill(image, np.array([[-1, 2]]))
    expected = np.zeros((4, 4), np.float32)
    expected[:3, 2:] = image[0, 1:, :2, 0]
    np.testing.assert_array_equal(out[0, ..., 0], expected)


def test_deterministic_given_the_generator():
    images = digits(16)
    first = numpy_augmentation.augment_mnist(images,
                                             np.random.default_rng(7))
    second = numpy_augmentation.augment_mnist(images,
                                              np.random.default_rng(7))
    other = numpy_augmentation.augment_mnist(images,
                                             np.random.default_rng(8))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)
    assert first.min() >= 0.0 and first.max() <= 255.0
