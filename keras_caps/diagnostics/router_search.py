"""Finding the routing layers of a model, at any depth."""

import keras

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router


@keras_caps_export("keras_caps.diagnostics.find_routers")
def find_routers(model, top_level_only=False):
    """The `Router` layers of `model`, in layer order, at any depth.

    Walks `model.layers` and, inside them, every layer that holds a public
    `layers` list (nested models, `InvertedAttentionRoutingStack`). The
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
        children = getattr(layer, "layers", None)
        if recursive and isinstance(children, (list, tuple)):
            _collect([child for child in children
                      if isinstance(child, keras.layers.Layer)],
                     found, seen, recursive)
