"""Finding the routing layers of a model, at any depth."""

import keras

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router


@keras_caps_export("keras_caps.diagnostics.find_routers")
def find_routers(model, top_level_only=False):
    """The `Router` layers of `model`, in layer order, at any depth.

    Walks `model.layers` and, inside each, the layers it holds as
    attributes or in lists and dicts (nested models,
    `InvertedAttentionRoutingStack`, wrappers such as
    `keras.layers.TimeDistributed`, a custom layer with a router). The
    routing temperature scheduler anneals these; the routing diagnostics
    read those that are nodes of the model's own graph
    (`top_level_only=True`), whose inputs the model can produce.

    Args:
        model: A `keras.Model`.
        top_level_only: bool. Only the routers among `model.layers`.
            Defaults to `False`.

    Returns:
        list of `Router` layers.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> [layer.name for layer in keras_caps.diagnostics.find_routers(model)]
    ['digit_caps']
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`"
            f". Received: model={model!r} of type {type(model).__name__}")
    found, seen = [], set()
    _collect(model.layers, found, seen, recursive=not top_level_only)
    return found


def _collect(layers, found, seen, recursive):
    for layer in layers:
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        if isinstance(layer, Router):
            found.append(layer)
        if recursive:
            _collect(_sublayers(layer), found, seen, recursive)


def _sublayers(layer):
    """The layers `layer` holds: in attributes, lists, tuples and dicts."""
    held = []
    for value in vars(layer).values():
        values = value.values() if isinstance(value, dict) else (
            value if isinstance(value, (list, tuple)) else [value])
        held.extend(item for item in values
                    if isinstance(item, keras.layers.Layer))
    return held
