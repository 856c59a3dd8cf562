"""Statistics behind a comparison's claims (NumPy and the standard library).

- `mean_interval`: the mean of per-seed values and its Student-t
  confidence interval (`t_quantile`: the Student-t quantile, from the
  regularised incomplete beta function);
- `mcnemar_exact`: McNemar's exact test of two models' per-image right /
  wrong arrays (McNemar, Psychometrika 1947; the exact, binomial form on
  the discordant pairs);
- `paired_bootstrap`: a paired bootstrap of the per-image accuracy
  difference (Efron & Tibshirani, "An Introduction to the Bootstrap",
  1993, §13 percentile interval and §16 bootstrap test);
- `paired_t_test` and `sign_flip_test`: two models' per-seed values
  compared across seeds, by Student's paired t-test and by the exact
  sign-flip permutation test (Fisher's randomisation test of paired
  differences);
- `holm`: Holm's step-down correction of many p-values (Holm, Scand. J.
  Statistics 1979);
- `relative_corruption_error`: the corrupted error over the clean error
  (the ratio behind the corruption errors of Hendrycks & Dietterich,
  ICLR 2019, §3, normalised here by the model's own clean error).
"""

import functools
import math

import numpy as np

# The largest sample the exact sign-flip test enumerates (2**16 patterns).
MAX_SIGN_FLIP_VALUES = 16


def _check_confidence(confidence):
    if (isinstance(confidence, bool)
            or not isinstance(confidence, (int, float, np.floating))
            or not 0 < confidence < 1):
        raise ValueError(
            "Received an invalid value for `confidence`, expected a number "
            f"in (0, 1) (e.g. 0.95). Received: confidence={confidence!r}")
    return float(confidence)


def _check_values(values, name, minimum=1):
    """A 1-D float64 array of finite numbers, at least `minimum` long."""
    try:
        array = np.asarray(values, dtype="float64")
    except (TypeError, ValueError):
        raise TypeError(
            f"Received an invalid value for `{name}`, expected a 1-D "
            f"sequence of numbers. Received: {name}={values!r}") from None
    if array.ndim != 1 or len(array) < minimum:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected a 1-D "
            f"sequence of at least {minimum} number(s). Received: "
            f"{name} of shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"Received an invalid value for `{name}`, expected finite "
            f"numbers. Received: {name}={values!r}")
    return array


def _check_pair(first, second, names):
    """Two equally long 1-D arrays of numbers."""
    first = _check_values(first, names[0])
    second = _check_values(second, names[1])
    if len(first) != len(second):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must be paired, one value each "
            f"per seed. Received: {len(first)} and {len(second)} values")
    return first, second


def _check_correct(correct_a, correct_b):
    """Two equally long 1-D boolean arrays (per-image right / wrong)."""
    arrays = []
    for name, value in (("correct_a", correct_a), ("correct_b", correct_b)):
        array = np.asarray(value)
        if array.dtype != np.bool_ or array.ndim != 1 or not len(array):
            raise TypeError(
                f"Received an invalid value for `{name}`, expected a "
                "non-empty 1-D boolean array (True where the model is "
                f"right). Received: {name} of dtype {array.dtype} and "
                f"shape {array.shape}")
        arrays.append(array)
    if len(arrays[0]) != len(arrays[1]):
        raise ValueError(
            "`correct_a` and `correct_b` must hold one value per test "
            f"image each. Received: {len(arrays[0])} and "
            f"{len(arrays[1])} images")
    return arrays


def _incomplete_beta_fraction(x, a, b):
    """The continued fraction of I_x(a, b), evaluated by Lentz's method
    (converges fast for x < (a + 1) / (a + b + 2))."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10000):
        # The even step d_{2m}, then the odd step d_{2m+1}.
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x
                          / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-16:
            return result
    raise ArithmeticError(  # Not reached for a, b > 0 and x in (0, 1).
        f"The incomplete beta fraction did not converge (x={x}, a={a}, "
        f"b={b})")


def regularized_incomplete_beta(x, a, b):
    """I_x(a, b) = B(x; a, b) / B(a, b), the regularised incomplete beta.

    Args:
        x: float in [0, 1].
        a, b: float > 0.

    Returns:
        float in [0, 1].

    Example:

    >>> round(regularized_incomplete_beta(0.5, 2.0, 3.0), 6)
    0.6875
    """
    if not 0.0 <= x <= 1.0 or a <= 0 or b <= 0:
        raise ValueError(
            "Received an invalid value for `x`, `a` or `b`, expected x in "
            f"[0, 1] and a, b > 0. Received: x={x!r}, a={a!r}, b={b!r}")
    if x in (0.0, 1.0):
        return float(x)
    # log(x^a (1 - x)^b / (a B(a, b))) without overflow.
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _incomplete_beta_fraction(x, a, b) / a
    # I_x(a, b) = 1 - I_{1-x}(b, a), where the fraction converges.
    return 1.0 - (math.exp(log_front)
                  * _incomplete_beta_fraction(1.0 - x, b, a) / b)


def _t_two_sided_tail(t, df):
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(df / (df + t * t), df / 2.0, 0.5)


def t_cdf(t, df):
    """The cumulative distribution function of Student's t.

    Args:
        t: float.
        df: float > 0. Degrees of freedom.

    Example:

    >>> round(t_cdf(1.0, 1), 6)  # 1/2 + arctan(1)/pi
    0.75
    """
    _check_df(df)
    half_tail = 0.5 * _t_two_sided_tail(float(t), float(df))
    return 1.0 - half_tail if t > 0 else half_tail


def _check_df(df):
    if (isinstance(df, bool) or not isinstance(df, (int, float, np.number))
            or not df > 0 or math.isinf(df)):
        raise ValueError(
            "Received an invalid value for `df`, expected a positive finite "
            f"number of degrees of freedom. Received: df={df!r}")


@functools.lru_cache(maxsize=256)
def t_quantile(probability, df):
    """The `probability` quantile of Student's t with `df` degrees of freedom.

    The inverse of `t_cdf`, found by bisection on the two-sided tail (a
    regularised incomplete beta function) to float precision.

    Args:
        probability: float in (0, 1).
        df: float > 0.

    Example:

    >>> round(t_quantile(0.975, 4), 4)
    2.7764
    """
    probability = _check_confidence(probability)
    _check_df(df)
    if probability == 0.5:
        return 0.0
    if probability < 0.5:
        return -t_quantile(1.0 - probability, df)
    # Solve P(|T| >= t) = 2 (1 - probability) for t > 0; the tail falls
    # as t grows.
    target = 2.0 * (1.0 - probability)
    low, high = 0.0, 1.0
    while _t_two_sided_tail(high, df) > target:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if _t_two_sided_tail(middle, df) > target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def mean_interval(values, confidence=0.95):
    """The mean of `values` (one per seed) and its Student-t interval.

    `mean ± t_{(1 + confidence) / 2, n - 1} · s / sqrt(n)`, `s` the sample
    standard deviation: the interval that covers the mean over seeds with
    probability `confidence` if the per-seed values are independent and
    normal. With fewer than 2 values there is no interval.

    Args:
        values: 1-D sequence of at least one finite number.
        confidence: float in (0, 1). Defaults to 0.95.

    Returns:
        dict: `"mean"`, `"std"` (sample, `None` for one value), `"low"`,
        `"high"` (`None` without an interval), `"n"`, `"confidence"` and
        `"reason"` (why there is no interval, else `None`).

    Example:

    >>> stats = mean_interval([0.96, 0.97, 0.98])
    >>> [round(stats[key], 4) for key in ("mean", "low", "high")]
    [0.97, 0.9452, 0.9948]
    """
    confidence = _check_confidence(confidence)
    values = _check_values(values, "values")
    result = {"mean": float(values.mean()), "std": None, "low": None,
              "high": None, "n": len(values), "confidence": confidence,
              "reason": None}
    if len(values) < 2:
        result["reason"] = ("one seed: no interval (a spread needs at "
                            "least 2 values)")
        return result
    std = float(values.std(ddof=1))
    half = (t_quantile((1.0 + confidence) / 2.0, len(values) - 1) * std
            / math.sqrt(len(values)))
    result.update(std=std, low=result["mean"] - half,
                  high=result["mean"] + half)
    return result


def _log_binomial_half(n, k):
    """log P(X = k) for X ~ Binomial(n, 1/2), for an array `k`."""
    k = np.asarray(k, dtype="float64")
    log_choose = (math.lgamma(n + 1.0)
                  - np.array([math.lgamma(value + 1.0) for value in k])
                  - np.array([math.lgamma(n - value + 1.0) for value in k]))
    return log_choose - n * math.log(2.0)


def mcnemar_exact(correct_a, correct_b):
    """McNemar's exact test: do two models err on the same images alike?

    Of the images exactly one model gets right, `b` are right for model A
    only and `c` for model B only; with no difference between the models
    `b ~ Binomial(b + c, 1/2)`. The two-sided p-value is
    `min(1, 2 P(X <= min(b, c)))`, summed in logs (no overflow for
    millions of images); `b + c = 0` gives 1.

    Args:
        correct_a, correct_b: 1-D boolean arrays, one entry per test image
            (the same images, in the same order): `True` where the model
            classifies the image right.

    Returns:
        dict: `"b"`, `"c"` (ints), `"p_value"` (float).

    Example:

    >>> result = mcnemar_exact(np.array([True, True, True, False]),
    ...                        np.array([False, False, True, False]))
    >>> result["b"], result["c"], result["p_value"]
    (2, 0, 0.5)
    """
    correct_a, correct_b = _check_correct(correct_a, correct_b)
    b = int(np.sum(correct_a & ~correct_b))
    c = int(np.sum(~correct_a & correct_b))
    n = b + c
    if n == 0 or b == c:
        return {"b": b, "c": c, "p_value": 1.0}
    smaller = min(b, c)
    # The terms fall at least as fast going down from `smaller` <= n / 2
    # as from the mode: below `smaller - 10 sqrt(n) - 100` they are
    # e^-200 times the last one or less, negligible in float64.
    first = max(0, smaller - int(10 * math.sqrt(n)) - 100)
    log_terms = _log_binomial_half(n, np.arange(first, smaller + 1))
    largest = log_terms.max()
    log_tail = largest + math.log(np.exp(log_terms - largest).sum())
    return {"b": b, "c": c,
            "p_value": min(1.0, 2.0 * math.exp(log_tail))}


def paired_bootstrap(correct_a, correct_b, *, num_resamples=10000,
                     confidence=0.95, seed=0):
    """A paired bootstrap of the accuracy difference of two models.

    The per-image differences `d_i = correct_a[i] - correct_b[i]` are
    resampled with replacement, `num_resamples` times, each resample
    `rng.integers(0, n, size=n)` of `rng = np.random.default_rng(seed)`
    in turn, and their mean `δ*_r` taken. The interval is the percentile
    interval of the `δ*_r` (`np.quantile`, linear); the two-sided p-value
    of "no difference" shifts the bootstrap distribution to the null,
    `p = (1 + #{r : |δ*_r - δ| >= |δ|}) / (num_resamples + 1)`, `δ` the
    observed difference (Efron & Tibshirani 1993, §13.3 and §16.4).

    Args:
        correct_a, correct_b: 1-D boolean arrays of the same images.
        num_resamples: int >= 1. Defaults to 10000.
        confidence: float in (0, 1). Defaults to 0.95.
        seed: int. Seeds the resampling. Defaults to 0.

    Returns:
        dict: `"difference"` (accuracy of A minus B), `"low"`, `"high"`,
        `"p_value"`, `"num_resamples"`, `"confidence"`, `"seed"`.

    Example:

    >>> a = np.array([True] * 90 + [False] * 10)
    >>> b = np.array([True] * 80 + [False] * 20)
    >>> result = paired_bootstrap(a, b, num_resamples=200, seed=0)
    >>> round(result["difference"], 2), result["p_value"] < 0.05
    (0.1, True)
    """
    correct_a, correct_b = _check_correct(correct_a, correct_b)
    confidence = _check_confidence(confidence)
    if (isinstance(num_resamples, bool)
            or not isinstance(num_resamples, (int, np.integer))
            or num_resamples < 1):
        raise ValueError(
            "Received an invalid value for `num_resamples`, expected a "
            f"positive integer. Received: num_resamples={num_resamples!r}")
    differences = correct_a.astype("float64") - correct_b.astype("float64")
    n = len(differences)
    observed = float(differences.mean())
    rng = np.random.default_rng(seed)
    resampled = np.empty(num_resamples)
    for index in range(num_resamples):
        resampled[index] = differences[rng.integers(0, n, size=n)].mean()
    alpha = 1.0 - confidence
    low, high = np.quantile(resampled, [alpha / 2.0, 1.0 - alpha / 2.0])
    extreme = int(np.sum(np.abs(resampled - observed)
                         >= abs(observed) - 1e-12))
    return {"difference": observed, "low": float(low), "high": float(high),
            "p_value": (1.0 + extreme) / (num_resamples + 1.0),
            "num_resamples": int(num_resamples), "confidence": confidence,
            "seed": seed}


def paired_t_test(values_a, values_b):
    """Student's paired t-test of two models' per-seed values.

    `t = mean(d) / (s_d / sqrt(n))` on the differences `d = a - b` of
    the same seeds, `n - 1` degrees of freedom, two-sided. Differences
    that are all zero give `p = 1` (no evidence of a difference); equal
    non-zero differences give `t = ±inf`, `p = 0`.

    Args:
        values_a, values_b: 1-D sequences, one value per seed, in the same
            seed order.

    Returns:
        dict: `"difference"` (mean of a - b), `"t"`, `"df"`, `"p_value"`
        (`None` with fewer than 2 seeds) and `"reason"` (why there is no
        test, else `None`).

    Example:

    >>> result = paired_t_test([0.97, 0.98, 0.96], [0.95, 0.97, 0.95])
    >>> round(result["t"], 4), round(result["p_value"], 4)
    (4.0, 0.0572)
    """
    values_a, values_b = _check_pair(values_a, values_b,
                                     ("values_a", "values_b"))
    differences = values_a - values_b
    n = len(differences)
    result = {"difference": float(differences.mean()), "t": None,
              "df": n - 1, "p_value": None, "reason": None}
    if n < 2:
        result["reason"] = "one seed: no across-seed test"
        return result
    std = float(differences.std(ddof=1))
    mean = result["difference"]
    if std == 0.0:
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        t = mean / (std / math.sqrt(n))
    result.update(t=t, p_value=1.0 if t == 0.0
                  else _t_two_sided_tail(t, n - 1))
    return result


def paired_equivalence_test(values_a, values_b, margin):
    """Two one-sided paired t-tests (TOST) that two models' per-seed
    values differ by less than `margin` (Schuirmann 1987).

    With `d = a - b` over the same seeds, `se = s_d / sqrt(n)` and `n - 1`
    degrees of freedom: the lower test rejects `mean(d) <= -margin`
    (`t = (mean + margin) / se`, upper tail), the upper test rejects
    `mean(d) >= margin` (`t = (mean - margin) / se`, lower tail); the
    TOST p-value is the larger of the two, and equivalence at level
    `alpha` is `p < alpha`, the same as the `1 - 2 alpha` Student-t
    interval of `mean(d)` lying inside `(-margin, margin)`. Equal
    differences (no spread) give p = 0 inside the margin and 1 outside.

    Args:
        values_a, values_b: 1-D sequences, one value per seed, in the
            same seed order.
        margin: float > 0. The largest difference called equivalent, in
            the values' units (accuracy 0.005 = 0.5 points), fixed before
            the comparison runs.

    Returns:
        dict: `"margin"`, `"difference"` (mean of a - b), `"df"`,
        `"p_lower"`, `"p_upper"`, `"p_value"` (`None` with fewer than 2
        seeds) and `"reason"` (why there is no test, else `None`).

    Example:

    >>> result = paired_equivalence_test([0.970, 0.972, 0.971],
    ...                                  [0.969, 0.972, 0.970], 0.005)
    >>> round(result["p_value"], 4)
    0.0029
    """
    values_a, values_b = _check_pair(values_a, values_b,
                                     ("values_a", "values_b"))
    margin = _check_margin(margin)
    differences = values_a - values_b
    n = len(differences)
    mean = float(differences.mean())
    result = {"margin": margin, "difference": mean, "df": n - 1,
              "p_lower": None, "p_upper": None, "p_value": None,
              "reason": None}
    if n < 2:
        result["reason"] = "one seed: no across-seed test"
        return result
    se = float(differences.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:
        inside = -margin < mean < margin
        p_lower = p_upper = 0.0 if inside else 1.0
    else:
        p_lower = 1.0 - t_cdf((mean + margin) / se, n - 1)
        p_upper = t_cdf((mean - margin) / se, n - 1)
    result.update(p_lower=float(p_lower), p_upper=float(p_upper),
                  p_value=float(max(p_lower, p_upper)))
    return result


def _check_margin(margin):
    """`margin` as a finite float above 0, else a `ValueError`."""
    if isinstance(margin, bool) or not isinstance(
            margin, (int, float, np.floating)) or not (
            math.isfinite(margin) and margin > 0):
        raise ValueError(
            "Received an invalid value for `margin`, expected a finite "
            f"number above 0. Received: margin={margin!r}")
    return float(margin)


def sign_flip_test(differences):
    """The exact sign-flip permutation test of per-seed differences.

    Under "no difference" each seed's difference is as likely with either
    sign; the p-value is the share of the `2**n` sign patterns whose
    `|sum of signed differences|` is at least the observed one (ties
    counted, to a relative 1e-9). The smallest possible p-value is
    `2 / 2**n` (1/16 with 5 seeds), whatever the differences.

    Args:
        differences: 1-D sequence of 1 to `MAX_SIGN_FLIP_VALUES` (16)
            finite numbers (one per seed).

    Returns:
        dict: `"difference"` (the mean), `"p_value"`, `"num_patterns"`,
        `"smallest_p_value"`.

    Example:

    >>> sign_flip_test([0.02, 0.01, 0.03])["p_value"]
    0.25
    """
    differences = _check_values(differences, "differences")
    n = len(differences)
    if n > MAX_SIGN_FLIP_VALUES:
        raise ValueError(
            "Received an invalid value for `differences`, expected at most "
            f"{MAX_SIGN_FLIP_VALUES} values (the exact test enumerates "
            f"2**n sign patterns). Received: {n} values")
    # (2**n, n) signs: row r holds the bits of r as -1 / +1.
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
    sums = np.abs((2 * bits - 1) @ differences)
    observed = abs(float(differences.sum()))
    scale = float(np.abs(differences).sum())
    extreme = int(np.sum(sums >= observed - 1e-9 * scale))
    return {"difference": float(differences.mean()),
            "p_value": extreme / 2 ** n, "num_patterns": 2 ** n,
            "smallest_p_value": 2.0 / 2 ** n}


def holm(p_values):
    """Holm's step-down adjusted p-values.

    With the `m` p-values sorted, `p_(1) <= ... <= p_(m)`, the adjusted
    `p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`: monotone in the
    sorted order, capped at 1, returned in the input order. Rejecting
    where `p~ < alpha` controls the family-wise error rate at `alpha`.

    Args:
        p_values: 1-D sequence of p-values in [0, 1].

    Returns:
        list of float, one per input.

    Example:

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03, 0.005])]
    [0.03, 0.06, 0.06, 0.02]
    """
    p_values = _check_values(p_values, "p_values", minimum=0)
    if np.any((p_values < 0) | (p_values > 1)):
        raise ValueError(
            "Received an invalid value for `p_values`, expected numbers "
            f"in [0, 1]. Received: p_values={p_values.tolist()!r}")
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p_values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()


def relative_corruption_error(corrupted_accuracy, clean_accuracy):
    """`(1 - corrupted_accuracy) / (1 - clean_accuracy)`.

    How many times the model's clean error its error under a corruption
    is (1: unaffected). Hendrycks & Dietterich (ICLR 2019, §3) normalise
    corruption errors by a reference model's; this ratio normalises by
    the model's own clean error. A clean accuracy of 1 has no clean error
    to divide by: `inf` if the corrupted accuracy is below 1, `None` (0 /
    0, undefined) if it is 1 too.

    Args:
        corrupted_accuracy, clean_accuracy: floats in [0, 1].

    Example:

    >>> round(relative_corruption_error(0.8, 0.95), 6)
    4.0
    """
    for name, value in (("corrupted_accuracy", corrupted_accuracy),
                        ("clean_accuracy", clean_accuracy)):
        if (isinstance(value, bool)
                or not isinstance(value, (int, float, np.number))
                or not 0.0 <= value <= 1.0):
            raise ValueError(
                f"Received an invalid value for `{name}`, expected an "
                f"accuracy in [0, 1]. Received: {name}={value!r}")
    clean_error = 1.0 - float(clean_accuracy)
    corrupted_error = 1.0 - float(corrupted_accuracy)
    if clean_error == 0.0:
        return None if corrupted_error == 0.0 else math.inf
    return corrupted_error / clean_error
