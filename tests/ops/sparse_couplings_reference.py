"""NumPy sparsemax, entmax-1.5 and their Jacobians, from the papers.

Written one vector at a time with loops, as the papers state them, to
check the vectorised `keras_caps.ops` versions:

- sparsemax: Martins & Astudillo (2016), Algorithm 1 (sort, find the
  support size k(z), threshold), Jacobian from their Proposition 2;
- entmax-1.5: Peters, Niculae & Martins (2019), Algorithm 2 (sort, for
  k = 1, 2, ... the threshold of the top-k support, stop when it falls
  between the k-th and (k+1)-th score), Jacobian from their
  Proposition 1 (`diag(g) - g g^T / sum(g)`, `g = p ** (2 - alpha)`).
"""

import numpy as np


def sparsemax(z):
    """Sparsemax of a 1-D array `z` (Algorithm 1)."""
    z = np.asarray(z, dtype="float64")
    ordered = np.sort(z)[::-1]
    support_size = 0
    for k in range(1, len(z) + 1):
        if 1.0 + k * ordered[k - 1] > ordered[:k].sum():
            support_size = k
    tau = (ordered[:support_size].sum() - 1.0) / support_size
    return np.maximum(z - tau, 0.0)


def entmax15(z):
    """Entmax with alpha = 1.5 of a 1-D array `z` (Algorithm 2)."""
    y = np.asarray(z, dtype="float64") / 2.0
    ordered = np.sort(y)[::-1]
    n = len(y)
    for k in range(1, n + 1):
        top = ordered[:k]
        mean = top.mean()
        spread = ((top - mean) ** 2).sum()
        tau = mean - np.sqrt(max(1.0 - spread, 0.0) / k)
        below = ordered[k] if k < n else -np.inf
        if below <= tau <= ordered[k - 1]:
            break
    return np.maximum(y - tau, 0.0) ** 2


def entmax15_by_bisection(z, steps=200):
    """Entmax-1.5 from its definition: `tau` with sum [z/2 - tau]_+^2 = 1.

    An independent check of Algorithm 2 (no sorting).
    """
    y = np.asarray(z, dtype="float64") / 2.0
    low, high = y.max() - 1.0, y.max()
    for _ in range(steps):
        tau = (low + high) / 2.0
        if (np.maximum(y - tau, 0.0) ** 2).sum() > 1.0:
            low = tau
        else:
            high = tau
    return np.maximum(y - (low + high) / 2.0, 0.0) ** 2


def sparsemax_jacobian(p):
    """d sparsemax / d z at output `p`: `diag(s) - s s^T / |S|`."""
    support = (np.asarray(p) > 0).astype("float64")
    return np.diag(support) - np.outer(support, support) / support.sum()


def entmax15_jacobian(p):
    """d entmax15 / d z at output `p`: `diag(g) - g g^T / sum(g)`."""
    g = np.sqrt(np.asarray(p, dtype="float64"))
    return np.diag(g) - np.outer(g, g) / g.sum()


def along_axis(function, x, axis):
    """`function` (of 1-D arrays) applied along `axis` of `x`."""
    return np.apply_along_axis(function, axis, np.asarray(x, "float64"))


def softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def one_hot_argmax(x, axis):
    index = np.expand_dims(np.argmax(x, axis=axis), axis)
    hard = np.zeros_like(np.asarray(x, "float64"))
    np.put_along_axis(hard, index, 1.0, axis=axis)
    return hard


def coupling(name, scores, axis, gumbel_inference="argmax"):
    """A router's couplings of `scores` (already divided by the
    temperature) at inference, for each `coupling` option."""
    scores = np.asarray(scores, "float64")
    if name == "softmax":
        return softmax(scores, axis)
    if name == "sparsemax":
        return along_axis(sparsemax, scores, axis)
    if name == "entmax15":
        return along_axis(entmax15, scores, axis)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-scores))
    if name == "gumbel_softmax":
        if gumbel_inference == "softmax":
            return softmax(scores, axis)
        return one_hot_argmax(scores, axis)
    raise ValueError(f"unknown coupling {name!r}")
