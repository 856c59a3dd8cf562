import keras

from keras_caps import layers
from keras_caps import ops
from keras_caps.api_export import keras_caps_export


@keras_caps_export("keras_caps.inference.credit_model")
def credit_model(model):
    """A model that also says which inputs drove each class score.

    Shares the layers (and weights) of `model`, a model whose last
    `VectorRouting` layers form a chain (each one routes the outputs of the
    previous one) and were called with `return_credit=True`, as
    `VectorRoutingHead` and `VectorRoutingCapsNet` build them. The result
    maps the inputs of `model` to `(outputs, credit)`: the outputs of
    `model` (the logits) and the end-to-end credit assignments of the
    chain,

    ```
    credit = compose_credit_assignments([phi_1, ..., phi_L])
    ```

    (Heinsen 2022, Appendix A; see `keras_caps.ops.compose_credit_assignments`),
    of shape `(batch, num_inputs, num_classes)`: the credit of each input of
    the first routing (a sequence position, a feature-map position in
    row-major order, or for several hidden states state after state) for
    each output of the last routing, scaled to unit standard deviation per
    example. Padded positions get zero credit.
    Nothing is computed twice: the credit assignments are outputs the
    routings compute anyway.

    Args:
        model: A `keras.Model` as described above, e.g. from
            `VectorRoutingHead` or `VectorRoutingCapsNet`.

    Returns:
        A functional `keras.Model` with outputs `(outputs, credit)`.

    Example:

    >>> model = keras_caps.applications.VectorRoutingCapsNet("mnist")
    >>> logits, credit = keras_caps.inference.credit_model(model)(
    ...     np.zeros((2, 28, 28, 1)))
    >>> tuple(credit.shape)  # the 7 x 7 stem positions, for each class
    (2, 49, 10)
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`"
            f". Received: model={model!r} of type {type(model).__name__}")
    routings = [layer for layer in model.layers
                if isinstance(layer, layers.VectorRouting)]
    if not routings:
        raise ValueError(
            "`credit_model` needs a model with `VectorRouting` layers. "
            f"Received: a model with layers "
            f"{[layer.name for layer in model.layers]}")
    for routing in routings:
        outputs = routing.output
        # With `return_credit=True` the credit `(b, i, j)` is the last
        # output; couplings alone (`return_couplings`) are 4-D.
        if (not isinstance(outputs, (list, tuple)) or len(outputs) < 2
                or len(outputs[-1].shape) != 3):
            raise ValueError(
                "`credit_model` needs routings called with "
                "`return_credit=True` (use the first output "
                "downstream), as `VectorRoutingHead` builds them. Received: "
                f"the routing {routing.name!r} returns no credit")
    # Walk back from the last routing while the input is a routing output.
    producers = {id(routing.output[0]): routing for routing in routings}
    chain = [routings[-1]]
    while True:
        inputs = keras.tree.flatten(chain[0].input)[0]
        previous = producers.get(id(inputs))
        if previous is None or previous in chain:
            break
        chain.insert(0, previous)
    credit = ops.compose_credit_assignments(
        [routing.output[-1] for routing in chain])
    return keras.Model(model.input, (model.output, credit),
                       name=f"{model.name}_credit")
