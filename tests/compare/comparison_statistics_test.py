"""The comparison's statistics against SciPy and hand-worked examples."""

import itertools
import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as scipy_stats

from keras_caps.compare import comparison_statistics as cs

pytestmark = pytest.mark.single_backend

_LEVELS = (0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.05, 0.001)


def test_t_quantile_matches_scipy():
    for df in range(1, 31):
        for level in _LEVELS:
            expected = scipy_stats.t.ppf(level, df)
            np.testing.assert_allclose(cs.t_quantile(level, df), expected,
                                       rtol=1e-10, atol=1e-12,
                                       err_msg=f"df={df}, level={level}")
    assert cs.t_quantile(0.5, 3) == 0.0
    # Non-integer degrees of freedom.
    np.testing.assert_allclose(cs.t_quantile(0.975, 2.5),
                               scipy_stats.t.ppf(0.975, 2.5), rtol=1e-10)


def test_t_cdf_and_incomplete_beta_match_scipy():
    for df in (1, 2, 4, 7.5, 30):
        for t in (-12.0, -2.0, -0.3, 0.0, 0.7, 3.0, 40.0):
            np.testing.assert_allclose(cs.t_cdf(t, df),
                                       scipy_stats.t.cdf(t, df),
                                       rtol=1e-11, atol=1e-15)
    for x, a, b in itertools.product((0.0, 1e-6, 0.2, 0.5, 0.93, 1.0),
                                     (0.5, 2.0, 15.0), (0.5, 3.0, 40.0)):
        np.testing.assert_allclose(cs.regularized_incomplete_beta(x, a, b),
                                   special.betainc(a, b, x), rtol=1e-11,
                                   atol=1e-15)


def test_mean_interval_matches_scipy():
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 12):
        values = rng.uniform(0.9, 1.0, size=n)
        for confidence in (0.9, 0.95, 0.99):
            result = cs.mean_interval(values, confidence)
            low, high = scipy_stats.t.interval(
                confidence, n - 1, loc=values.mean(),
                scale=scipy_stats.sem(values))
            np.testing.assert_allclose([result["low"], result["high"]],
                                       [low, high], rtol=1e-12)
            assert result["mean"] == pytest.approx(values.mean())
            assert result["std"] == pytest.approx(values.std(ddof=1))
            assert result["reason"] is None


def test_mean_interval_of_one_seed_has_none_and_says_why():
    result = cs.mean_interval([0.97])
    assert result["mean"] == 0.97
    assert result["low"] is None and result["high"] is None
    assert "one seed" in result["reason"]


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1, True, "0.95"])
def test_confidence_outside_the_unit_interval_is_refused(confidence):
    with pytest.raises(ValueError, match="invalid value for `confidence`"):
        cs.mean_interval([0.9, 0.95], confidence)


def test_mean_interval_refuses_bad_values():
    with pytest.raises(ValueError, match="at least 1"):
        cs.mean_interval([])
    with pytest.raises(ValueError, match="finite"):
        cs.mean_interval([0.9, float("nan")])
    with pytest.raises(ValueError, match="1-D"):
        cs.mean_interval([[0.9, 0.8]])


def _pairs(b, c, both_right=3, both_wrong=2):
    """Right/wrong arrays with `b` images right for A only, `c` for B."""
    a = [True] * b + [False] * c + [True] * both_right + [False] * both_wrong
    other = ([False] * b + [True] * c + [True] * both_right
             + [False] * both_wrong)
    return np.array(a), np.array(other)


@pytest.mark.parametrize("b, c", [(0, 0), (4, 4), (5, 0), (0, 6), (10, 2),
                                  (1, 7), (130, 100), (17, 40)])
def test_mcnemar_matches_scipy_binomial_test(b, c):
    result = cs.mcnemar_exact(*_pairs(b, c))
    assert (result["b"], result["c"]) == (b, c)
    expected = (1.0 if b + c == 0
                else scipy_stats.binomtest(b, b + c, 0.5).pvalue)
    np.testing.assert_allclose(result["p_value"], expected, rtol=1e-9)


def test_mcnemar_of_millions_of_images_does_not_overflow():
    # 2**(b + c) overflows a float; the test works in logs.
    b, c = 1_000_000, 1_003_000
    a = np.zeros(b + c, dtype=bool)
    a[:b] = True
    result = cs.mcnemar_exact(a, ~a)
    expected = scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert 0 < result["p_value"] < 1
    np.testing.assert_allclose(result["p_value"], expected, rtol=1e-6)


def test_mcnemar_and_bootstrap_refuse_bad_arrays():
    right = np.array([True, False, True])
    for function in (cs.mcnemar_exact, cs.paired_bootstrap):
        with pytest.raises(TypeError, match="`correct_b`.*boolean.*int"):
            function(right, np.array([1, 0, 1]))
        with pytest.raises(TypeError, match="`correct_a`.*shape \\(1, 3\\)"):
            function(right[None], right)
        with pytest.raises(ValueError, match="3 and 2 images"):
            function(right, right[:2])


def _bootstrap_by_hand(a, b, num_resamples, confidence, seed):
    """Resampling images with replacement, written from the definition."""
    rng = np.random.default_rng(seed)
    n = len(a)
    observed = a.mean() - b.mean()
    means = []
    for _ in range(num_resamples):
        picked = rng.integers(0, n, size=n)
        means.append(a[picked].mean() - b[picked].mean())
    means = np.array(means)
    tail = (1 - confidence) / 2
    extreme = np.count_nonzero(
        np.abs(means - observed) >= abs(observed) - 1e-12)
    return (observed, np.quantile(means, tail), np.quantile(means, 1 - tail),
            (extreme + 1) / (num_resamples + 1))


def test_paired_bootstrap_matches_a_numpy_bootstrap_with_the_same_seed():
    rng = np.random.default_rng(0)
    a = rng.random(300) < 0.9
    b = rng.random(300) < 0.85
    result = cs.paired_bootstrap(a, b, num_resamples=500, confidence=0.9,
                                 seed=11)
    observed, low, high, p_value = _bootstrap_by_hand(
        a.astype(float), b.astype(float), 500, 0.9, 11)
    np.testing.assert_allclose(
        [result["difference"], result["low"], result["high"],
         result["p_value"]], [observed, low, high, p_value], rtol=1e-12)
    assert low < observed < high
    # Identical models: no difference, p = 1.
    same = cs.paired_bootstrap(a, a, num_resamples=50)
    assert (same["difference"], same["p_value"]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="`num_resamples`"):
        cs.paired_bootstrap(a, b, num_resamples=0)


def test_paired_t_test_matches_scipy():
    rng = np.random.default_rng(5)
    for n in (2, 3, 5, 8):
        a = rng.uniform(0.8, 1.0, size=n)
        b = a - rng.normal(0.01, 0.02, size=n)
        result = cs.paired_t_test(a, b)
        expected = scipy_stats.ttest_rel(a, b)
        np.testing.assert_allclose([result["t"], result["p_value"]],
                                   [expected.statistic, expected.pvalue],
                                   rtol=1e-10)
        assert result["df"] == n - 1


def test_paired_t_test_edge_cases():
    one = cs.paired_t_test([0.9], [0.8])
    assert one["p_value"] is None and "one seed" in one["reason"]
    same = cs.paired_t_test([0.9, 0.8, 0.7], [0.9, 0.8, 0.7])
    assert (same["t"], same["p_value"]) == (0.0, 1.0)
    shifted = cs.paired_t_test([0.5, 0.75, 0.25], [0.25, 0.5, 0.0])
    assert shifted["t"] == math.inf and shifted["p_value"] == 0.0
    with pytest.raises(ValueError, match="paired.*3 and 2 values"):
        cs.paired_t_test([0.9, 0.8, 0.7], [0.9, 0.8])


def test_sign_flip_test_by_hand():
    # |±0.02 ±0.01 ±0.03| reaches the observed 0.06 only with all signs
    # equal: 2 of the 8 patterns.
    assert cs.sign_flip_test([0.02, 0.01, 0.03])["p_value"] == 0.25
    # Magnitudes 1, 1, 1, 2 (observed sum 3). With k of the ones positive
    # the sum is (2k - 3) ± 2; |sum| >= 3 for k=0 and -2 (1 pattern), k=1
    # and -2 (3), k=2 and +2 (3), k=3 and +2 (1): 8 of 16, ties counted.
    result = cs.sign_flip_test([1.0, 1.0, -1.0, 2.0])
    assert result["p_value"] == 0.5
    assert result["num_patterns"] == 16
    # Five seeds all in one direction: the smallest p-value, 2/32.
    five = cs.sign_flip_test([0.01, 0.02, 0.03, 0.04, 0.05])
    assert five["p_value"] == five["smallest_p_value"] == 1 / 16
    assert cs.sign_flip_test([0.0, 0.0])["p_value"] == 1.0


def test_sign_flip_test_matches_scipy_permutation_test():
    rng = np.random.default_rng(7)
    for n in (3, 5, 8, 10):
        a = rng.uniform(0.8, 1.0, size=n)
        b = a - rng.normal(0.01, 0.02, size=n)
        expected = scipy_stats.permutation_test(
            (a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples", n_resamples=np.inf,
            vectorized=True).pvalue
        np.testing.assert_allclose(cs.sign_flip_test(a - b)["p_value"],
                                   expected, rtol=1e-12)
    with pytest.raises(ValueError, match="at most 16 values.*17"):
        cs.sign_flip_test(np.ones(17))


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06;
    # 0.04 x 1 = 0.04 -> raised to 0.06 to stay monotone.
    np.testing.assert_allclose(cs.holm([0.01, 0.04, 0.03, 0.005]),
                               [0.03, 0.06, 0.06, 0.02])
    # Capped at 1: 0.5 x 2 = 1.0, then 0.6 raised to 1.0.
    assert cs.holm([0.6, 0.5]) == [1.0, 1.0]
    assert cs.holm([]) == []
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        cs.holm([0.5, 1.2])


def test_holm_matches_the_sequential_procedure():
    # Holm's procedure rejects the sorted hypotheses while
    # p_(k) <= alpha / (m - k + 1); the adjusted p-values must reject
    # exactly those at every alpha, and be each hypothesis's smallest
    # such alpha (the max over j <= i of (m - j + 1) p_(j), capped).
    rng = np.random.default_rng(2)
    p_values = rng.uniform(0, 0.08, size=12)
    adjusted = np.array(cs.holm(p_values))
    m = len(p_values)
    ranked = np.sort(p_values)
    for i, p in enumerate(p_values):
        rank = int(np.searchsorted(ranked, p))
        expected = min(1.0, max((m - j) * ranked[j]
                                for j in range(rank + 1)))
        assert adjusted[i] == pytest.approx(expected)
    for alpha in (0.01, 0.05, 0.1):
        rejected = set()
        for k, index in enumerate(np.argsort(p_values)):
            if p_values[index] > alpha / (m - k):
                break
            rejected.add(int(index))
        assert set(np.flatnonzero(adjusted <= alpha).tolist()) == rejected


def test_relative_corruption_error():
    # Clean error 5 %, corrupted error 20 %: four times the clean error.
    assert cs.relative_corruption_error(0.8, 0.95) == pytest.approx(4.0)
    assert cs.relative_corruption_error(0.95, 0.95) == pytest.approx(1.0)
    assert cs.relative_corruption_error(0.9, 1.0) == math.inf
    assert cs.relative_corruption_error(1.0, 1.0) is None
    with pytest.raises(ValueError, match="`clean_accuracy`.*1.5"):
        cs.relative_corruption_error(0.9, 1.5)


@pytest.mark.parametrize("seed", range(6))
def test_equivalence_test_is_two_one_sided_t_tests(seed):
    random = np.random.default_rng(seed)
    values_b = random.uniform(0.95, 0.99, 5)
    values_a = values_b + random.normal(0.002 * seed - 0.004, 0.003, 5)
    margin = 0.005
    result = cs.paired_equivalence_test(values_a, values_b, margin)
    differences = values_a - values_b
    lower = scipy_stats.ttest_1samp(differences, -margin,
                                    alternative="greater").pvalue
    upper = scipy_stats.ttest_1samp(differences, margin,
                                    alternative="less").pvalue
    assert result["p_lower"] == pytest.approx(lower, rel=1e-9)
    assert result["p_upper"] == pytest.approx(upper, rel=1e-9)
    assert result["p_value"] == pytest.approx(max(lower, upper), rel=1e-9)
    # p < 0.05 exactly when the 90 % interval lies inside the margin.
    low, high = scipy_stats.t.interval(
        0.90, 4, loc=differences.mean(), scale=scipy_stats.sem(differences))
    assert (result["p_value"] < 0.05) == (-margin < low and high < margin)


def test_equivalence_without_spread_and_with_one_seed():
    inside = cs.paired_equivalence_test([0.97, 0.98], [0.968, 0.978],
                                           0.005)
    assert inside["p_value"] == 0.0
    outside = cs.paired_equivalence_test([0.97, 0.98], [0.96, 0.97],
                                            0.005)
    assert outside["p_value"] == 1.0
    one = cs.paired_equivalence_test([0.97], [0.96], 0.005)
    assert one["p_value"] is None and "one seed" in one["reason"]
    for margin in (0, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="`margin`"):
            cs.paired_equivalence_test([0.9, 0.8], [0.9, 0.8], margin)
