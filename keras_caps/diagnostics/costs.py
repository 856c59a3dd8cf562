"""What a model costs: inference multiply–adds and parameters, from shapes.

Backend-agnostic: everything is read off the layers' shapes and weights,
nothing runs.

The multiply–add convention: each product of two numbers summed into a
contraction (a convolution, a dense layer, a vote, an agreement, a weighted
sum over children) is one multiply–add; elementwise work counts nothing:
activations, bias additions, squash, lengths, softmax, masks, pooling,
rescaling, and normalisation (BatchNormalization folds into the preceding
convolution at inference; LayerNormalization and GroupNormalization are a
few elementwise operations per value). A `keras_caps.layers.Router`
counts its own equations (`Router.multiply_adds`). A layer with weights
that none of these rules knows raises a `ValueError` naming it, so an
unknown layer is never counted as free.
"""

import logging
import math

import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export

# Layers with weights whose work is elementwise (or a table lookup): no
# multiply–adds.
_ELEMENTWISE_WITH_WEIGHTS = (
    keras.layers.BatchNormalization,
    keras.layers.LayerNormalization,
    keras.layers.GroupNormalization,
    keras.layers.Normalization,
    keras.layers.Embedding,
)
# Layers without weights that still contract tensors: not known, refused.
_CONTRACTIONS_WITHOUT_WEIGHTS = (
    keras.layers.Dot,
    keras.layers.Attention,
    keras.layers.AdditiveAttention,
)


@keras_caps_export("keras_caps.diagnostics.count_multiply_adds")
def count_multiply_adds(model):
    """Inference multiply–adds per example, counted from layer shapes.

    Convolutions (`Conv1D/2D/3D`, `DepthwiseConv2D`, `SeparableConv2D`,
    transposed convolutions), `Dense`, the primary-capsule layers and
    every `keras_caps.layers.Router` (its `multiply_adds`) are counted;
    elementwise layers count nothing (see the module docstring for the
    convention). The decoder (the nested model named `"decoder"`, which
    only reconstructs) is counted apart from the classifier path.

    Args:
        model: A built `keras.Model` (functional or sequential; nested
            models are counted layer by layer).

    Returns:
        dict: `"total"`, the classifier path's multiply–adds (decoder
        excluded); `"decoder"`, the decoder's (0 without one);
        `"per_layer"`, layer path -> multiply–adds for every layer with a
        non-zero count (nested layers as `"decoder/dense_1"`).

    Raises:
        ValueError: For a layer with weights (or a weight-free
            contraction such as `Dot`) whose cost is not known, naming it.

    Example:

    >>> inputs = keras.Input((8, 8, 3))
    >>> x = keras.layers.Conv2D(4, 3)(inputs)  # 6*6*4 outputs * 3*3*3
    >>> x = keras.layers.Flatten()(x)
    >>> outputs = keras.layers.Dense(10)(x)  # 144 * 10
    >>> count = count_multiply_adds(keras.Model(inputs, outputs))
    >>> count["total"]
    5328
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`."
            f" Received: model={model!r}")
    if not model.built:
        raise ValueError(
            "`count_multiply_adds` needs a built model (build it or call it "
            f"on data first). Received: model={model.name!r}")
    per_layer = {}
    _count_model(model, "", per_layer)
    decoder_prefix = roles.DECODER + "/"
    decoder = sum(count for name, count in per_layer.items()
                  if name.startswith(decoder_prefix))
    return {"total": sum(per_layer.values()) - decoder, "decoder": decoder,
            "per_layer": per_layer}


@keras_caps_export("keras_caps.diagnostics.count_parameters")
def count_parameters(model):
    """Trainable parameters with and without the decoder.

    Args:
        model: A built `keras.Model`; its decoder is the nested layer named
            `"decoder"` (`keras_caps.model_roles.DECODER`), if any.

    Returns:
        dict: `"trainable"` (all trainable parameters),
        `"trainable_without_decoder"` and `"decoder"` (the decoder's
        trainable parameters, 0 without one).

    Example:

    >>> model = keras_caps.applications.CapsuleClassifier(
    ...     "mnist", router="dynamic", compile=False)
    >>> count_parameters(model)["trainable_without_decoder"]
    161664
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`."
            f" Received: model={model!r}")
    total = _trainable(model)
    decoder = 0
    for layer in model.layers:
        if layer.name == roles.DECODER:
            decoder += _trainable(layer)
    return {"trainable": total, "trainable_without_decoder": total - decoder,
            "decoder": decoder}


def _trainable(layer):
    return int(sum(math.prod(weight.shape)
                   for weight in layer.trainable_weights))


def _count_model(model, prefix, per_layer):
    # Keras names a layer's `index`-th call `"{id(layer)}_ib-{index}"`;
    # the graph keeps the keys of its own calls (not those of the same
    # layer in other models).
    graph = getattr(model, "_functional", None) or model
    graph_nodes = getattr(graph, "_nodes", None)
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        name = prefix + layer.name
        if isinstance(layer, keras.Model):
            _count_model(layer, name + "/", per_layer)
            continue
        count = sum(layer_multiply_adds(layer, input_shape, output_shape)
                    for input_shape, output_shape in _call_shapes(
                        layer, graph_nodes))
        if count:
            per_layer[name] = count


def _call_shapes(layer, graph_nodes):
    """`(input_shape, output_shape)` of each call of `layer` in a graph."""
    nodes = layer._inbound_nodes
    if graph_nodes:
        nodes = [node for index, node in enumerate(nodes)
                 if f"{id(layer)}_ib-{index}" in graph_nodes] or nodes
    shapes = []
    for node in nodes:
        inputs = node.arguments.keras_tensors
        outputs = node.outputs
        input_shape = (tuple(inputs[0].shape) if len(inputs) == 1
                       else [tuple(tensor.shape) for tensor in inputs])
        shapes.append((input_shape, tuple(outputs[0].shape)))
    if not shapes:
        raise ValueError(
            f"Layer {layer.name!r} ({type(layer).__name__}) was never called "
            "in the model's graph, so its shapes are unknown.")
    return shapes


def layer_multiply_adds(layer, input_shape, output_shape):
    """Multiply–adds per example of one call of `layer` (module docstring).

    Args:
        layer: A built layer.
        input_shape: Its input shape (batch first), a list for several
            inputs.
        output_shape: Its (first) output shape.

    Returns:
        int.
    """
    if isinstance(layer, layers.Router):
        return int(layer.multiply_adds(input_shape))
    for kind, count in _COUNTERS:
        if isinstance(layer, kind):
            return int(count(layer, input_shape, output_shape))
    if isinstance(layer, _ELEMENTWISE_WITH_WEIGHTS):
        return 0
    if isinstance(layer, _CONTRACTIONS_WITHOUT_WEIGHTS) or layer.weights:
        raise ValueError(
            f"`count_multiply_adds` does not know the cost of layer "
            f"{layer.name!r} ({type(layer).__name__}), expected "
            "convolutions, Dense, primary capsules, normalisation, a "
            "`keras_caps.layers.Router` or a layer without weights. "
            f"Received: layer={layer.name!r}")
    return 0


def _channels_last(layer):
    return getattr(layer, "data_format", "channels_last") == "channels_last"


def _split(layer, shape):
    """`(spatial size, channels)` of a feature-map shape."""
    if _channels_last(layer):
        return math.prod(shape[1:-1]), int(shape[-1])
    return math.prod(shape[2:]), int(shape[1])


def _conv(layer, input_shape, output_shape):
    # Each output value: kernel window x input channels of its group.
    positions, _ = _split(layer, output_shape)
    _, channels = _split(layer, input_shape)
    groups = getattr(layer, "groups", 1)
    return (positions * layer.filters * math.prod(layer.kernel_size)
            * channels // groups)


def _conv_transpose(layer, input_shape, output_shape):
    # Each input value is spread over a kernel window of every filter.
    positions, channels = _split(layer, input_shape)
    return positions * channels * math.prod(layer.kernel_size) * layer.filters


def _depthwise(layer, input_shape, output_shape):
    positions, _ = _split(layer, output_shape)
    _, channels = _split(layer, input_shape)
    return (positions * channels * layer.depth_multiplier
            * math.prod(layer.kernel_size))


def _separable(layer, input_shape, output_shape):
    positions, _ = _split(layer, output_shape)
    _, channels = _split(layer, input_shape)
    middle = channels * layer.depth_multiplier
    return positions * middle * (math.prod(layer.kernel_size) + layer.filters)


def _dense(layer, input_shape, output_shape):
    return math.prod(input_shape[1:]) * layer.units


def _primary_caps(layer, input_shape, output_shape):
    # Its depthwise convolution reads the layer's input.
    convolution = layer.depthwise_conv
    return _depthwise(convolution, input_shape,
                      convolution.compute_output_shape(input_shape))


def _conv_primary_caps(layer, input_shape, output_shape):
    convolution = layer.conv
    return _conv(convolution, input_shape,
                 convolution.compute_output_shape(input_shape))


def _primary_matrix_caps(layer, input_shape, output_shape):
    # A 1x1 convolution: every position, input channels x kernel columns.
    return math.prod(input_shape[1:-1]) * math.prod(layer.kernel.shape)


def _inverted_attention_stack(layer, input_shape, output_shape):
    # Tsai et al. (2020), Procedure 1, all layers routed together: each
    # layer's votes in every pass (the bottom layer's children are fixed:
    # its votes once; routed one layer after the other, every layer's
    # children are fixed while it routes), and per pass after the uniform
    # first the agreement and the weighted sum of each child-parent pair.
    passes = layer.num_iterations
    count = 0
    for index, (router, shape) in enumerate(zip(
            layer.layers, layer._layer_input_shapes(input_shape))):
        vote_passes = passes
        if index == 0 or layer.schedule == "sequential":
            vote_passes = 1
        count += router._child_parent_pairs(shape) * (
            vote_passes * router.vote_multiply_adds(shape)
            + 2 * (passes - 1) * router.capsule_dim)
    return count


_COUNTERS = (
    (keras.layers.DepthwiseConv2D, _depthwise),
    (keras.layers.SeparableConv2D, _separable),
    (keras.layers.SeparableConv1D, _separable),
    (keras.layers.Conv1DTranspose, _conv_transpose),
    (keras.layers.Conv2DTranspose, _conv_transpose),
    (keras.layers.Conv3DTranspose, _conv_transpose),
    (keras.layers.Conv1D, _conv),
    (keras.layers.Conv2D, _conv),
    (keras.layers.Conv3D, _conv),
    (keras.layers.Dense, _dense),
    (layers.PrimaryCaps, _primary_caps),
    (layers.ConvPrimaryCaps, _conv_primary_caps),
    (layers.PrimaryMatrixCaps, _primary_matrix_caps),
    (layers.InvertedAttentionRoutingStack, _inverted_attention_stack),
)


def cost_record(model):
    """The costs an evaluation record keeps, `None` where not countable.

    A model with a layer whose multiply–adds are unknown gets `None`
    counts and a logged warning naming the layer, so an evaluation still
    completes; parameters are always counted.

    Returns:
        dict: `"trainable_parameters_with_decoder"`,
        `"decoder_parameters"`, `"multiply_adds"` (the classifier path)
        and `"decoder_multiply_adds"`.

    Example:

    >>> inputs = keras.Input((4,))
    >>> record = cost_record(keras.Model(inputs, keras.layers.Dense(2)(
    ...     inputs)))
    >>> record["multiply_adds"], record["trainable_parameters_with_decoder"]
    (8, 10)
    """
    parameters = count_parameters(model)
    try:
        counts = count_multiply_adds(model)
    except (ValueError, NotImplementedError) as error:
        logging.warning("Multiply-adds of %r not counted: %s", model.name,
                        error)
        counts = {"total": None, "decoder": None}
    return {"trainable_parameters_with_decoder": parameters["trainable"],
            "decoder_parameters": parameters["decoder"],
            "multiply_adds": counts["total"],
            "decoder_multiply_adds": counts["decoder"]}
