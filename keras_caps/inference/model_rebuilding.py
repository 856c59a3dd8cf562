"""Rebuilding a functional model from an edited config, with its weights."""

import keras


def as_functional(model, argument_name="model"):
    """`model` (a Functional or built Sequential) and its functional config.

    Returns:
        `(functional_model, config)`: a Sequential model is wrapped in a
        functional model over the same layers.
    """
    if isinstance(model, keras.Sequential):
        if not model.built:
            raise ValueError(
                f"`{argument_name}` is a Sequential model that is not built "
                "yet. Build it (give it an `Input`) first.")
        # A Sequential model has one input and one output.
        model = keras.Model(model.inputs[0], model.outputs[0],
                            name=model.name)
    config = None
    if isinstance(model, keras.Model):
        try:
            config = model.get_config()
        except NotImplementedError:  # A subclassed model without a config.
            pass
    if not isinstance(config, dict) or "output_layers" not in config:
        raise TypeError(
            f"`{argument_name}` must be a functional or Sequential Keras "
            f"model. Received: {argument_name} of type "
            f"{type(model).__name__}")
    return model, config


def rebuild_model(config, weights_by_layer_name):
    """A new model from a functional `config`, its layers' weights set.

    Args:
        config: dict from `Model.get_config()` of a functional model,
            possibly edited.
        weights_by_layer_name: dict from a layer name of `config` to the list
            of arrays its `set_weights` takes. Layers without weights may be
            left out.

    Returns:
        A new `keras.Model` that shares nothing with the model `config`
        came from.
    """
    model = keras.Model.from_config(config)
    for layer in model.layers:
        weights = weights_by_layer_name.get(layer.name)
        if weights:
            layer.set_weights(weights)
    return model
