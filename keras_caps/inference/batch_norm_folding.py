import keras
import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.inference.model_rebuilding import as_functional
from keras_caps.inference.model_rebuilding import rebuild_model
from keras_caps.layers import PrimaryCaps

_CONVOLUTIONS = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_DEPTHWISE_CONVOLUTIONS = (keras.layers.DepthwiseConv1D,
                           keras.layers.DepthwiseConv2D)


@keras_caps_export("keras_caps.inference.fold_batch_normalization")
def fold_batch_normalization(model):
    """An inference copy of `model` with its batch norms folded into weights.

    At inference a `BatchNormalization` layer is a per-channel affine map,
    `y = a * x + b` with `a = gamma / sqrt(moving_variance + epsilon)` and
    `b = beta - moving_mean * a`. When `y` feeds a single linear layer that
    reads each input channel through its kernel, the map folds into that
    layer's kernel and bias:
    ```
    kernel'[..., c, o] = kernel[..., c, o] * a[c]
    bias'[o] = bias[o] + sum_{..., c} kernel[..., c, o] * b[c]
    ```
    and the normalisation disappears from the graph. Efficient-CapsNet's
    stem (convolution -> ReLU -> batch norm) folds each batch norm into the
    next convolution and the last one into `PrimaryCaps`, which removes four
    elementwise passes over the largest activations.

    A batch norm is folded when it normalises the last (channels) axis, its
    output is not a model output and feeds exactly one layer, called once,
    that is a `Conv1D`/`Conv2D`/`Conv3D` (`"valid"` padding, channels last,
    `groups=1`), a `DepthwiseConv1D`/`DepthwiseConv2D` (`"valid"` padding,
    channels last), a `Dense` (not quantized, no LoRA) or a `PrimaryCaps`.
    Other batch norms are kept: with `"same"` padding the zeros added at the
    borders would be normalised too, so the fold would not be exact. Only the
    top-level graph is rewritten; nested models are copied as they are.

    The result is an independent copy (new layers, new variables) for
    inference: its outputs equal `model(x, training=False)` up to float
    rounding, but it cannot train the batch norms any more.

    Args:
        model: A functional or built Sequential `keras.Model`.

    Returns:
        A new functional `keras.Model` with the same inputs and outputs.

    Example:

    >>> inputs = keras.Input((8, 8, 3))
    >>> x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    >>> x = keras.layers.BatchNormalization()(x)
    >>> outputs = keras.layers.Conv2D(2, 3)(x)
    >>> model = keras.Model(inputs, outputs)
    >>> folded = keras_caps.inference.fold_batch_normalization(model)
    >>> [layer.__class__.__name__ for layer in folded.layers]
    ['InputLayer', 'Conv2D', 'Conv2D']
    """
    model, config = as_functional(model)
    entries = {entry["name"]: entry for entry in config["layers"]}
    output_names = {history[0] for history in
                    _keras_histories(config["output_layers"])}
    weights = {entry["name"]: model.get_layer(entry["name"]).get_weights()
               for entry in config["layers"]}
    for name, entry in list(entries.items()):
        batch_norm = model.get_layer(name)
        if (not isinstance(batch_norm, keras.layers.BatchNormalization)
                or name in output_names or len(entry["inbound_nodes"]) != 1):
            continue
        if len(entry["inbound_nodes"][0]["args"]) != 1:
            continue
        (bn_input,) = entry["inbound_nodes"][0]["args"]
        rank = len(bn_input["config"]["shape"])
        if batch_norm.axis not in (-1, rank - 1):
            continue
        consumers = [other for other in entries.values()
                     if any(history[0] == name for history in
                            _keras_histories(other["inbound_nodes"]))]
        if len(consumers) != 1 or not _reads_only(consumers[0], name):
            continue
        consumer = consumers[0]
        folded = _folded_weights(model.get_layer(consumer["name"]),
                                 *_affine_map(batch_norm))
        if folded is None:
            continue
        # Rewire the consumer to read the batch norm's input directly.
        consumer["inbound_nodes"][0]["args"] = [bn_input]
        if "use_bias" in consumer["config"]:
            consumer["config"]["use_bias"] = True
        weights[consumer["name"]] = folded
        del entries[name]
    config["layers"] = [entry for entry in config["layers"]
                        if entry["name"] in entries]
    return rebuild_model(config, weights)


def _keras_histories(structure):
    """Every `[layer_name, node_index, tensor_index]` in a config structure."""
    if isinstance(structure, dict):
        if "keras_history" in structure:
            yield structure["keras_history"]
            return
        for value in structure.values():
            yield from _keras_histories(value)
    elif isinstance(structure, (list, tuple)):
        if (len(structure) == 3 and isinstance(structure[0], str)
                and all(isinstance(item, int) for item in structure[1:])):
            yield structure
        else:
            for item in structure:
                yield from _keras_histories(item)


def _reads_only(entry, input_name):
    """Whether `entry` is called once, with one positional tensor from it."""
    if len(entry["inbound_nodes"]) != 1:
        return False
    node = entry["inbound_nodes"][0]
    histories = list(_keras_histories(node))
    return (len(node["args"]) == 1 and len(histories) == 1
            and histories[0][0] == input_name)


def _affine_map(batch_norm):
    """`(a, b)` with `batch_norm(x, training=False) == a * x + b`."""
    mean = keras.ops.convert_to_numpy(batch_norm.moving_mean)
    variance = keras.ops.convert_to_numpy(batch_norm.moving_variance)
    scale = (keras.ops.convert_to_numpy(batch_norm.gamma) if batch_norm.scale
             else 1.0)
    offset = (keras.ops.convert_to_numpy(batch_norm.beta)
              if batch_norm.center else 0.0)
    a = np.asarray(scale, "float64") / np.sqrt(
        variance.astype("float64") + batch_norm.epsilon)
    b = np.asarray(offset, "float64") - mean.astype("float64") * a
    return a, b


def _folded_weights(layer, a, b):
    """`[kernel, bias]` of `layer` reading `x` instead of `a * x + b`.

    Returns `None` when `layer` is not a kind this fold is exact for.
    """
    if isinstance(layer, PrimaryCaps):
        kernel, bias = layer.get_weights()
        return _fold_depthwise(kernel, bias, a, b)
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        return None
    if isinstance(layer, _DEPTHWISE_CONVOLUTIONS):
        if layer.padding != "valid":
            return None
        kernel, bias = _kernel_and_bias(layer)
        return _fold_depthwise(kernel, bias, a, b)
    if isinstance(layer, _CONVOLUTIONS):
        if layer.padding != "valid" or layer.groups != 1:
            return None
    elif not (isinstance(layer, keras.layers.Dense)
              and layer.quantization_mode is None
              and not layer.lora_enabled):
        return None
    kernel, bias = _kernel_and_bias(layer)
    # kernel: (..., in_channels, out_channels); the leading axes are spatial.
    wide = kernel.astype("float64")
    folded_kernel = wide * a[:, None]
    spatial_axes = tuple(range(kernel.ndim - 2))
    folded_bias = bias + np.einsum("co,c->o", wide.sum(axis=spatial_axes), b)
    return [folded_kernel.astype(kernel.dtype),
            folded_bias.astype(kernel.dtype)]


def _fold_depthwise(kernel, bias, a, b):
    # kernel: (..., channels, multiplier); output channel c * m + k.
    wide = kernel.astype("float64")
    spatial_axes = tuple(range(kernel.ndim - 2))
    folded_kernel = wide * a[:, None]
    folded_bias = bias + (wide.sum(axis=spatial_axes)
                          * b[:, None]).reshape(-1)
    return [folded_kernel.astype(kernel.dtype),
            folded_bias.astype(kernel.dtype)]


def _kernel_and_bias(layer):
    kernel = keras.ops.convert_to_numpy(layer.kernel)
    if layer.use_bias:
        bias = keras.ops.convert_to_numpy(layer.bias).astype("float64")
    else:
        bias = np.zeros(kernel.shape[-1] * (
            kernel.shape[-2] if isinstance(layer, _DEPTHWISE_CONVOLUTIONS)
            else 1))
    return kernel, bias
