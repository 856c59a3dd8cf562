"""Numbers that tell whether routing sharpens: entropy, concentration, L_geo.

The diagnostics the attention-routing literature asks for (Vaswani et
al.'s head analysis as used for capsule routing; Sabour et al.'s agreement):
the mean coupling entropy per layer and per head (head collapse shows as a
few heads with low entropy and the others near the uniform maximum), the
share of each parent's coupling mass on its top-3 children (localised
against diffuse routing) and the geometric agreement
`L_geo = sum_ij c_ij ||votes_ij - v_j||^2` per routing iteration, which
should fall across the iterations of a trained model; and the sparsity,
the share of couplings that are exactly zero (sparsemax and entmax-1.5,
Martins & Astudillo 2016 and Peters et al. 2019; one-hot Gumbel samples).
"""

import keras
import numpy as np

from keras_caps.api_export import keras_caps_export

_NORMALIZATIONS = ("parents", "children")
_TOP_K = 3


@keras_caps_export("keras_caps.diagnostics.routing_diagnostics")
def routing_diagnostics(couplings, votes=None, parents=None,
                        normalization="parents"):
    """Entropy, sparsity, top-3 concentration and agreement of couplings.

    ```
    entropy[h] = mean over batch and children i of
                 -sum_j c[h, i, j] log c[h, i, j]
    top3_concentration[j] = mean over batch and heads of
                 (sum of the 3 largest c[h, :, j]) / sum_i c[h, i, j]
    geometric_agreement[t] = mean over batch of
                 sum_h sum_ij c_t[h, i, j] ||votes[i, j][h] - v_t[j][h]||^2
    sparsity[h] = share of c[h, i, j] == 0 (exactly), over batch, i, j
    ```

    `[h]` is head `h`'s slice of the pose (the whole pose with one head).
    With `normalization="children"` (couplings that sum to 1 over the
    children) the entropy is taken over the children of each parent.

    Args:
        couplings: Array `(batch, num_heads, num_children, num_parents)`
            (the couplings layout of every `keras_caps.layers.Router`),
            or a list of them, one per routing iteration (the last one
            gives the entropy and concentration), as `routing_trace`
            returns.
        votes: Optional array `(batch, num_children, num_parents, dim)`:
            the votes of each child for each parent.
        parents: Optional list of arrays `(batch, num_parents, dim)`, the
            parents of each iteration, as many as `couplings`; with `votes`
            it gives the geometric agreement.
        normalization: str. `"parents"` (each child's couplings sum to 1)
            or `"children"`. Defaults to `"parents"`.

    Returns:
        A dict of NumPy values: `"entropy"` (float, nats, mean over the
        heads), `"entropy_per_head"` `(num_heads,)`, `"sparsity"` (float,
        the share of exact zeros among the last couplings) and
        `"sparsity_per_head"` `(num_heads,)`, `"top3_concentration"`
        `(num_parents,)`, and with `votes` and `parents`,
        `"geometric_agreement"` `(num_iterations,)`.

    Example:

    >>> uniform = np.full((2, 1, 4, 2), 0.5)
    >>> diagnostics = keras_caps.diagnostics.routing_diagnostics(uniform)
    >>> round(float(diagnostics["entropy"]), 4)  # log 2, the maximum
    0.6931
    >>> diagnostics["top3_concentration"].tolist()  # 3 of 4 children
    [0.75, 0.75]
    >>> one_hot = np.array([[[[1.0, 0.0], [0.0, 1.0]]]])
    >>> keras_caps.diagnostics.routing_diagnostics(one_hot)["sparsity"]
    0.5
    """
    if normalization not in _NORMALIZATIONS:
        raise ValueError(
            "Received an invalid value for `normalization`, expected one of "
            f"{list(_NORMALIZATIONS)}. Received: "
            f"normalization={normalization!r}")
    per_iteration = [_as_array(c, "couplings", 4) for c in (
        couplings if isinstance(couplings, (list, tuple)) else [couplings])]
    if not per_iteration:
        raise ValueError(
            "Received an invalid value for `couplings`, expected an array "
            "or a non-empty list of arrays. Received: couplings=[]")
    last = per_iteration[-1]
    probabilities = last if normalization == "parents" else np.swapaxes(
        last, 2, 3)
    logs = np.log(np.clip(probabilities, 1e-30, None))
    entropy = -np.sum(probabilities * logs, axis=-1)  # (b, h, i)
    entropy_per_head = np.mean(entropy, axis=(0, 2))
    sparsity_per_head = np.mean(last == 0.0, axis=(0, 2, 3))
    top = np.sort(last, axis=2)[:, :, -_TOP_K:, :]  # (b, h, 3, j)
    mass = np.sum(last, axis=2)
    concentration = np.sum(top, axis=2) / np.maximum(mass, 1e-30)
    result = {
        "entropy": float(np.mean(entropy_per_head)),
        "entropy_per_head": entropy_per_head,
        "sparsity": float(np.mean(sparsity_per_head)),
        "sparsity_per_head": sparsity_per_head,
        "top3_concentration": np.mean(concentration, axis=(0, 1)),
    }
    if (votes is None) != (parents is None):
        raise ValueError(
            "The geometric agreement needs both `votes` and `parents`. "
            f"Received: votes={'None' if votes is None else 'an array'}, "
            f"parents={'None' if parents is None else 'a list'}")
    if votes is not None:
        votes = _as_array(votes, "votes", 4)
        if not isinstance(parents, (list, tuple)):
            parents = [parents]
        if len(parents) != len(per_iteration):
            raise ValueError(
                "Expected one `parents` array per iteration of `couplings` "
                f"({len(per_iteration)}). Received: {len(parents)}")
        result["geometric_agreement"] = np.array([
            _geometric_agreement(c, votes, _as_array(v, "parents", 3))
            for c, v in zip(per_iteration, parents)])
    return result


def _geometric_agreement(couplings, votes, parents):
    batch, num_heads, num_children, num_parents = couplings.shape
    dim = votes.shape[-1]
    if votes.shape[:3] != (batch, num_children, num_parents) or (
            parents.shape != (batch, num_parents, dim)):
        raise ValueError(
            "Expected votes (batch, children, parents, dim) and parents "
            "(batch, parents, dim) matching couplings of shape "
            f"{couplings.shape}. Received: votes.shape={votes.shape}, "
            f"parents.shape={parents.shape}")
    # (b, i, j, h, e): each head's slice of the pose.
    distance = (votes - parents[:, None]).reshape(
        batch, num_children, num_parents, num_heads, dim // num_heads)
    squared = np.sum(distance**2, axis=-1)  # (b, i, j, h)
    total = np.einsum("bhij,bijh->b", couplings, squared)
    return float(np.mean(total))


def _as_array(value, name, ndim):
    array = np.asarray(keras.ops.convert_to_numpy(value), dtype="float64")
    if array.ndim != ndim:
        raise ValueError(
            f"Received an invalid shape for `{name}`, expected {ndim} "
            f"axes. Received: {name}.shape={array.shape}")
    return array
