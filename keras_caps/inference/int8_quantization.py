"""`quantize_int8`: `model.quantize("int8")`, capsule layers included."""

import warnings

from keras_caps.layers.int8_kernels import Int8Kernels


def quantize_int8(model):
    """Quantizes `model`'s weights to int8, every capsule layer included.

    Runs Keras' `model.quantize("int8")` (its `Dense`, `EinsumDense` and
    `Embedding` layers, and every capsule layer with `Int8Kernels`: the
    routers' vote kernels), then the capsule layers Keras skips because
    they hold sublayers of their own: `PrimaryCaps` and `ConvPrimaryCaps`
    (their convolution) and `InvertedAttentionRouting` (its layer
    normalisation). Keras' notices about layers without int8
    (convolutions, normalisations) are not repeated: the returned names
    say what was quantized. The routing maths stays float32.

    Args:
        model: A built Keras model, float32 or bfloat16 (Keras refuses
            int8 on float16 layers).

    Returns:
        list of str: the names of the quantized layers, in model order.

    Example:

    >>> import keras_caps
    >>> model = keras_caps.applications.EfficientCapsNet(
    ...     "mnist", reconstruction=False)
    >>> quantize_int8(model)
    ['primary_caps', 'depthwise_conv', 'digit_caps']
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Layer .* does not have a "
                                "`quantize` method")
        warnings.filterwarnings("ignore", "The convolution .* of a "
                                "capsule layer is quantized with")
        model.quantize("int8")
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, Int8Kernels) and layer.quantization_mode is None:
            try:
                layer.quantize("int8")
            except NotImplementedError:  # Quantized by the layer holding it.
                continue
    model.predict_function = None  # Rebuilt with the int8 weights.
    return [layer.name for layer in model._flatten_layers(include_self=False)
            if layer.quantization_mode == "int8"]
