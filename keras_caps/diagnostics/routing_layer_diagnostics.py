"""Routing diagnostics of the routers of a model, on a batch of inputs."""

import keras
import numpy as np

from keras_caps import model_roles
from keras_caps.api_export import keras_caps_export
from keras_caps.diagnostics.router_search import find_routers
from keras_caps.diagnostics.routing_statistics import routing_diagnostics


@keras_caps_export("keras_caps.diagnostics.routing_layer_diagnostics")
def routing_layer_diagnostics(model, inputs, layer_names=None):
    """`routing_diagnostics` of every routing layer of `model` on `inputs`.

    Runs `model` up to each routing layer on the batch `inputs` and asks
    the layer for its `routing_trace`: every pass's couplings, hence the
    entropy and concentration of the last pass, and, for routers with
    votes, the geometric agreement of every pass.

    Args:
        model: A `keras.Model` with routing layers.
        inputs: A batch for the model's image input (its `"image"` input,
            or its first); raw pixels for the applications.
        layer_names: list of str. Defaults to `None`: every `Router` among
            the model's own layers (`find_routers(model,
            top_level_only=True)`).

    Returns:
        dict from layer name to the dict of `routing_diagnostics`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> found = keras_caps.diagnostics.routing_layer_diagnostics(
    ...     model, np.zeros((2, 28, 28, 1)))
    >>> sorted(found["digit_caps"])
    ['entropy', 'entropy_per_head', 'geometric_agreement', 'sparsity',
     'sparsity_per_head', 'top3_concentration']
    """
    routers = diagnosable_routers(model, layer_names)
    image = model_roles.image_input(model)
    results = {}
    for layer in routers:
        children = keras.Model(image, layer.input)(inputs, training=False)
        trace = layer.routing_trace(children)
        votes = trace["votes"]
        results[layer.name] = routing_diagnostics(
            [_to_numpy(c) for c in trace["couplings"]],
            votes=None if votes is None else _to_numpy(votes),
            parents=(None if votes is None
                     else [_to_numpy(v) for v in trace["parents"]]),
            normalization=layer.normalization_axis)
    return results


@keras_caps_export("keras_caps.diagnostics.diagnosable_routers")
def diagnosable_routers(model, layer_names=None):
    """The routers `routing_layer_diagnostics` reads, checked up front.

    Raises a `ValueError` naming the layers when a name is not a routing
    layer of the model's own graph (e.g. a router inside an
    `InvertedAttentionRoutingStack`, whose inputs the model cannot
    produce), so a training callback fails before the first epoch.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> [r.name for r in keras_caps.diagnostics.diagnosable_routers(model)]
    ['digit_caps']
    """
    top_level = {layer.name: layer
                 for layer in find_routers(model, top_level_only=True)}
    if layer_names is None:
        if not top_level:
            nested = [layer.name for layer in find_routers(model)]
            raise ValueError(
                "Found no routing layer among the model's own layers (the "
                "routing diagnostics need a router's inputs from the model"
                f"'s graph). Routers nested inside other layers: {nested}. "
                "Received: a model with layers "
                f"{[layer.name for layer in model.layers]}")
        return list(top_level.values())
    if isinstance(layer_names, str):
        layer_names = [layer_names]
    missing = [name for name in layer_names if name not in top_level]
    if missing:
        raise ValueError(
            "Received an invalid value for `layer_names`: the routing "
            f"diagnostics read the routers {sorted(top_level)} of the "
            f"model's own graph, not {missing}. Received: "
            f"layer_names={list(layer_names)!r}")
    return [top_level[name] for name in layer_names]


def _to_numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(tensor))
