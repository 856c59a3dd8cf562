"""Sparse and hard normalisations of routing scores.

Alternatives to the softmax that routers use to turn scores into
couplings: sparsemax (Martins & Astudillo, 2016) and entmax-1.5 (Peters,
Niculae & Martins, 2019) give probabilities with exact zeros, and the
straight-through Gumbel-softmax (Jang et al., 2017; Maddison et al., 2017)
gives one-hot samples whose gradient is the softmax relaxation's.
Everything is computed in at least float32.
"""

import numpy as np
from keras import ops
from keras import random

from keras_caps.api_export import keras_caps_export
from keras_caps.ops.capsule_ops import at_least_float32

# The smallest uniform draw for the Gumbel noise: `-log(-log(u))` stays
# finite (about -4.5 at the smallest normal float32).
_SMALLEST_UNIFORM = float(np.finfo("float32").tiny)


@keras_caps_export("keras_caps.ops.sparsemax")
def sparsemax(x, axis=-1):
    """Sparsemax: the Euclidean projection of `x` onto the simplex.

    ```
    sparsemax(x) = [x - tau]_+    with tau such that sum(sparsemax(x)) = 1
    ```

    `tau` comes from the sorted scores (Martins & Astudillo, 2016,
    Algorithm 1): with `x_(1) >= x_(2) >= ...`, the support holds the
    `k` largest scores, `k` the largest index with
    `1 + k x_(k) > sum_(j <= k) x_(j)`, and `tau = (sum_(j <= k) x_(j) -
    1) / k`. Scores outside the support get exactly 0. The gradient is the
    paper's Jacobian `diag(s) - s s^T / |S|` (`s` the support indicator):
    `tau` is recomputed from the support, so no gradient flows through the
    sort.

    Args:
        x: Tensor of scores.
        axis: int. The axis that sums to 1. Defaults to `-1`.

    Returns:
        Tensor of `x`'s shape, in at least float32: non-negative, summing
        to 1 over `axis`.

    Example:

    >>> p = keras_caps.ops.sparsemax(np.array([[1.0, 0.8, -1.0]]))
    >>> np.round(keras.ops.convert_to_numpy(p).astype("float64"), 4).tolist()
    [[0.6, 0.4, 0.0]]

    Reference:
    - [Martins & Astudillo, 2016](https://arxiv.org/abs/1602.02068),
      Algorithm 1 and Proposition 2.
    """
    x = _shifted_to_last_axis(x, axis)  # (..., n), max 0
    ordered = _sorted_descending(ops.stop_gradient(x))  # (..., n)
    ranks = _ranks(x)  # (n,): 1, 2, ..., n
    totals = ops.cumsum(ordered, axis=-1)
    in_support = ops.cast(1.0 + ranks * ordered > totals, x.dtype)
    size = ops.sum(in_support, axis=-1, keepdims=True)  # (..., 1), >= 1
    threshold = (ops.sum(in_support * ordered, axis=-1, keepdims=True)
                 - 1.0) / size
    # The same threshold, differentiable through the unsorted scores.
    support = x > ops.stop_gradient(threshold)  # (..., n), bool
    threshold = (ops.sum(ops.where(support, x, 0.0), axis=-1,
                         keepdims=True) - 1.0) / ops.sum(
        ops.cast(support, x.dtype), axis=-1, keepdims=True)
    outputs = ops.where(support, x - threshold, 0.0)
    return ops.moveaxis(outputs, -1, axis)


@keras_caps_export("keras_caps.ops.entmax15")
def entmax15(x, axis=-1):
    """Entmax with alpha = 1.5: sparse, and smoother than sparsemax.

    ```
    entmax15(x) = [x / 2 - tau]_+ ** 2    with tau such that the sum is 1
    ```

    The exact sort-based algorithm of Peters et al. (2019, Algorithm 2):
    with `y = x / 2` sorted, `y_(1) >= y_(2) >= ...`, a support of the
    `k` largest gives the mean `m_k`, the sum of squared deviations
    `s_k` and `tau_k = m_k - sqrt((1 - s_k) / k)`; the support is every
    `k` with `tau_k <= y_(k)`. Scores outside it get exactly 0. The
    gradient is the paper's Jacobian `diag(g) - g g^T / sum(g)` with
    `g = sqrt(p)`: `tau` is recomputed from the support, so no gradient
    flows through the sort.

    Args:
        x: Tensor of scores.
        axis: int. The axis that sums to 1. Defaults to `-1`.

    Returns:
        Tensor of `x`'s shape, in at least float32: non-negative, summing
        to 1 over `axis`.

    Example:

    >>> p = keras_caps.ops.entmax15(np.array([[1.0, 0.0, -4.0]]))
    >>> np.round(keras.ops.convert_to_numpy(p).astype("float64"), 4).tolist()
    [[0.8307, 0.1693, 0.0]]

    Reference:
    - [Peters, Niculae & Martins, 2019](https://arxiv.org/abs/1905.05702),
      Algorithm 2 and Proposition 1.
    """
    half = _shifted_to_last_axis(x, axis) / 2.0  # (..., n), max 0
    ordered = _sorted_descending(ops.stop_gradient(half))  # (..., n)
    ranks = _ranks(half)  # (n,): 1, 2, ..., n
    means = ops.cumsum(ordered, axis=-1) / ranks
    squares = ops.cumsum(ordered * ordered, axis=-1) / ranks
    # s_k / k = mean of squares - squared mean; tau_k for every k.
    spread = (1.0 / ranks) - (squares - means * means)
    thresholds = means - ops.sqrt(ops.maximum(spread, 0.0))
    size = ops.sum(ops.cast(thresholds <= ordered, "int32"), axis=-1,
                   keepdims=True)  # (..., 1), >= 1
    threshold = ops.take_along_axis(thresholds, size - 1, axis=-1)
    support = half > ops.stop_gradient(threshold)  # (..., n), bool
    threshold = _entmax_threshold(half, support)
    outputs = ops.where(support, ops.square(half - threshold), 0.0)
    return ops.moveaxis(outputs, -1, axis)


def _entmax_threshold(half, support):
    """`tau` of entmax-1.5 for the boolean `support`, differentiably.

    `sum_S (y - tau)^2 = 1` with `tau` below the support's mean. Scores
    off the support are replaced (not multiplied) by zeros, so a huge one
    cannot overflow into the sums.
    """
    size = ops.sum(ops.cast(support, half.dtype), axis=-1, keepdims=True)
    mean = ops.sum(ops.where(support, half, 0.0), axis=-1,
                   keepdims=True) / size
    deviations = ops.sum(
        ops.where(support, ops.square(half - mean), 0.0), axis=-1,
        keepdims=True)
    # Positive on a true support: the floor only keeps the gradient finite.
    gap = ops.maximum((1.0 - deviations) / size, 1e-12)
    return mean - ops.sqrt(gap)


@keras_caps_export("keras_caps.ops.gumbel_noise")
def gumbel_noise(shape, seed=None):
    """Standard Gumbel noise `-log(-log(u))`, `u` uniform, in float32.

    Args:
        shape: tuple of ints. The shape of the draw.
        seed: `None`, an int or a `keras.random.SeedGenerator`, as for
            `keras.random.uniform` (the same int gives the same draw).

    Returns:
        A float32 tensor of `shape`, finite.

    Example:

    >>> noise = keras_caps.ops.gumbel_noise((2, 3), seed=1)
    >>> tuple(noise.shape)
    (2, 3)
    """
    uniform = random.uniform(shape, minval=_SMALLEST_UNIFORM, maxval=1.0,
                             dtype="float32", seed=seed)
    return -ops.log(-ops.log(uniform))


@keras_caps_export("keras_caps.ops.straight_through_gumbel_softmax")
def straight_through_gumbel_softmax(x, axis=-1, seed=None):
    """A one-hot Gumbel-max sample whose gradient is the soft sample's.

    ```
    g       = gumbel_noise(shape(x))
    soft    = softmax(x + g)                       # over axis
    forward = one_hot(argmax(x + g))               # exactly 0 and 1
    gradient of forward := gradient of soft        # straight-through
    ```

    The one-hot sample picks index `j` with probability `softmax(x)_j`
    (the Gumbel-max trick). Divide `x` by a temperature first for a
    tempered distribution (and a sharper relaxation). The straight-through
    estimator `forward = hard + (soft - stop_gradient(soft))` adds an exact
    zero, so the forward values are exactly one-hot.

    Args:
        x: Tensor of scores (unnormalised log-probabilities).
        axis: int. The axis sampled over. Defaults to `-1`.
        seed: `None`, an int or a `keras.random.SeedGenerator` for the
            noise (the same int gives the same sample).

    Returns:
        Tensor of `x`'s shape, in at least float32, one-hot over `axis`.

    Example:

    >>> sample = keras_caps.ops.straight_through_gumbel_softmax(
    ...     np.array([[0.0, 1.0, 2.0]]), seed=3)
    >>> float(keras.ops.sum(sample))
    1.0

    Reference:
    - [Jang, Gu & Poole, 2017](https://arxiv.org/abs/1611.01144),
      Sections 2 and 2.2 (straight-through).
    - [Maddison, Mnih & Teh, 2017](https://arxiv.org/abs/1611.00712).
    """
    x = at_least_float32(x)
    perturbed = x + ops.cast(gumbel_noise(ops.shape(x), seed), x.dtype)
    soft = ops.softmax(perturbed, axis=axis)
    hard = one_hot_argmax(perturbed, axis=axis)
    return hard + (soft - ops.stop_gradient(soft))


@keras_caps_export("keras_caps.ops.one_hot_argmax")
def one_hot_argmax(x, axis=-1):
    """The one-hot of `argmax(x)` over `axis` (ties: the first index).

    Args:
        x: Tensor of scores.
        axis: int. Defaults to `-1`.

    Returns:
        Tensor of `x`'s shape, in at least float32, with a single 1 over
        `axis`; it has no gradient.

    Example:

    >>> hard = keras_caps.ops.one_hot_argmax(np.array([[0.1, 0.7, 0.7]]))
    >>> keras.ops.convert_to_numpy(hard).tolist()
    [[0.0, 1.0, 0.0]]
    """
    x = at_least_float32(x)
    rank = len(x.shape)
    index = ops.argmax(ops.stop_gradient(x), axis=axis)
    return ops.one_hot(index, ops.shape(x)[axis], axis=axis % rank,
                       dtype=x.dtype)


def _shifted_to_last_axis(x, axis):
    """`x` in at least float32, `axis` last, minus its (constant) maximum.

    Both functions are invariant to the shift, which keeps the largest
    score at 0, so it is always in the support, even for huge scores.
    """
    x = ops.moveaxis(at_least_float32(x), axis, -1)
    return x - ops.stop_gradient(ops.max(x, axis=-1, keepdims=True))


def _sorted_descending(x):
    return ops.flip(ops.sort(x, axis=-1), axis=-1)


def _ranks(x):
    """`1, 2, ..., n` for the last axis of `x`, in its dtype."""
    return ops.arange(1, ops.shape(x)[-1] + 1, dtype=x.dtype)
