"""Numbers that tell whether routing sharpens: entropy, concentration, L_geo.

The diagnostics the attention-routing literature asks for (Vaswani et
al.'s head analysis as used for capsule routing; Sabour et al.'s agreement):
the mean coupling entropy per layer and per head (head collapse shows as a
few heads with low entropy and the others near the uniform maximum), the
share of each parent's coupling mass on its top-3 children (localised
against diffuse routing) and the geometric agreement
`L_geo = sum_ij c_ij ||votes_ij - v_j||^2` per routing iteration, which
should fall across the iterations of a trained model.
"""

import keras
import numpy as np

from keras_caps import layers
from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _inputs
from keras_caps.visualization.routing_maps import _returns_couplings

_NORMALIZATIONS = ("parents", "children")
_TOP_K = 3


@keras_caps_export("keras_caps.visualization.routing_diagnostics")
def routing_diagnostics(couplings, votes=None, parents=None,
                        normalization="parents"):
    """Entropy, top-3 concentration and geometric agreement of couplings.

    ```
    entropy[h] = mean over batch and children i of
                 -sum_j c[h, i, j] log c[h, i, j]
    top3_concentration[j] = mean over batch and heads of
                 (sum of the 3 largest c[h, :, j]) / sum_i c[h, i, j]
    geometric_agreement[t] = mean over batch of
                 sum_h sum_ij c_t[h, i, j] ||votes[i, j][h] - v_t[j][h]||^2
    ```

    `[h]` is head `h`'s slice of the pose (the whole pose with one head).
    With `normalization="children"` (couplings that sum to 1 over the
    children) the entropy is taken over the children of each parent.

    Args:
        couplings: Array `(batch, num_heads, num_children, num_parents)`,
            or a list of them, one per routing iteration (the last one
            gives the entropy and concentration), as
            `AttentionRouting.routing_trace` returns. For routers with
            `(batch, num_parents, num_children)` couplings (`DynamicRouting`,
            `FCCaps`), pass `couplings.transpose(0, 2, 1)[:, None]`.
        votes: Optional array `(batch, num_children, num_parents, dim)`:
            the votes of each child for each parent.
        parents: Optional list of arrays `(batch, num_parents, dim)`, the
            parents of each iteration, as many as `couplings`; with `votes`
            it gives the geometric agreement.
        normalization: str. `"parents"` (each child's couplings sum to 1)
            or `"children"`. Defaults to `"parents"`.

    Returns:
        A dict of NumPy values: `"entropy"` (float, nats, mean over the
        heads), `"entropy_per_head"` `(num_heads,)`,
        `"top3_concentration"` `(num_parents,)`, and with `votes` and
        `parents`, `"geometric_agreement"` `(num_iterations,)`.

    Example:

    >>> uniform = np.full((2, 1, 4, 2), 0.5)
    >>> diagnostics = keras_caps.visualization.routing_diagnostics(uniform)
    >>> round(float(diagnostics["entropy"]), 4)  # log 2, the maximum
    0.6931
    >>> diagnostics["top3_concentration"].tolist()  # 3 of 4 children
    [0.75, 0.75]
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
    top = np.sort(last, axis=2)[:, :, -_TOP_K:, :]  # (b, h, 3, j)
    mass = np.sum(last, axis=2)
    concentration = np.sum(top, axis=2) / np.maximum(mass, 1e-30)
    result = {
        "entropy": float(np.mean(entropy_per_head)),
        "entropy_per_head": entropy_per_head,
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


@keras_caps_export("keras_caps.visualization.routing_layer_diagnostics")
def routing_layer_diagnostics(model, inputs, layer_names=None):
    """`routing_diagnostics` of every routing layer of `model` on `inputs`.

    Runs `model` up to each routing layer on the batch `inputs` and asks the
    layer for its couplings: every iteration (with votes and parents, hence
    the geometric agreement) for `AttentionRouting`, which exposes them
    through `routing_trace`; the last iteration's couplings for
    `DynamicRouting`, `FCCaps` and fully connected
    `InvertedAttentionRouting`.

    Args:
        model: A `keras.Model` with routing layers.
        inputs: A batch for the model's image input (its `"image"` input,
            or its first); raw pixels for the applications.
        layer_names: list of str. Defaults to `None`: every routing layer
            with `(batch, parents, children)` couplings or
            `AttentionRouting`.

    Returns:
        dict from layer name to the dict of `routing_diagnostics`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> found = keras_caps.visualization.routing_layer_diagnostics(
    ...     model, np.zeros((2, 28, 28, 1)))
    >>> sorted(found["digit_caps"])
    ['entropy', 'entropy_per_head', 'top3_concentration']
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`"
            f". Received: model={model!r} of type {type(model).__name__}")
    if layer_names is None:
        layer_names = [layer.name for layer in model.layers
                       if _has_diagnostics(layer)]
    elif isinstance(layer_names, str):
        layer_names = [layer_names]
    results = {}
    for name in layer_names:
        layer = model.get_layer(name)
        if not _returns_couplings(layer):
            raise ValueError(
                "`routing_layer_diagnostics` needs routing layers (whose "
                "call takes `return_couplings`). Received: layer "
                f"{name!r} of type {type(layer).__name__}")
        children = keras.Model(_inputs.image_input(model), layer.input)(
            inputs, training=False)
        if isinstance(layer, layers.AttentionRouting):
            trace = layer.routing_trace(children)
            results[name] = routing_diagnostics(
                [_inputs.to_numpy(c) for c in trace["couplings"]],
                votes=_inputs.to_numpy(trace["votes"]),
                parents=[_inputs.to_numpy(v) for v in trace["parents"]],
                normalization=layer.normalization)
            continue
        _, couplings = layer(children, return_couplings=True)
        couplings = _inputs.to_numpy(couplings).astype("float64")
        if couplings.ndim != 3:
            raise ValueError(
                "`routing_layer_diagnostics` handles couplings of shape "
                "(batch, parents, children). Received: layer "
                f"{name!r} with couplings of shape {couplings.shape}")
        results[name] = routing_diagnostics(
            np.transpose(couplings, (0, 2, 1))[:, None])
    return results


def _has_diagnostics(layer):
    if isinstance(layer, layers.AttentionRouting):
        return True
    if isinstance(layer, layers.InvertedAttentionRouting):
        return layer.kernel_size is None
    return _returns_couplings(layer)


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
