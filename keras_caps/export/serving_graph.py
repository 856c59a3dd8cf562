"""The serving contract as a Keras graph, for the exporters that convert a
Keras model (ONNX, LiteRT, OpenVINO): one input `image`, the outputs in a
fixed order, NaN for images that hold a NaN or an infinity.

The SavedModel writes the same contract as a TensorFlow function
(`keras_caps.export.saved_model`).
"""


import keras

from keras_caps import model_roles as roles


def output_shapes(model):
    """`{name: shape without the batch}` of the outputs of `model`, in the
    order they are exported (a single output is named after its layer).

    Example:

    >>> image = keras.Input((4, 4, 1))
    >>> scores = keras.layers.Dense(3, name="length")(
    ...     keras.layers.Flatten()(image))
    >>> output_shapes(keras.Model(image, scores))
    {'length': (3,)}
    """
    if isinstance(model.output, dict):
        return {name: tuple(tensor.shape[1:])
                for name, tensor in model.output.items()}
    return {model.output_names[0]: tuple(model.output.shape[1:])}


def serving_graph(model, input_range, shapes):
    """A functional model around `model` with the serving contract.

    One input named `image`, float32 `(batch, height, width, channels)`,
    scaled from [0, 1] to pixels when `input_range="unit"`; a list of
    float32 outputs in the order of `shapes` (see `output_shapes`); every
    output of an image holding a NaN or an infinity is NaN.

    Args:
        model: A serving model (`keras_caps.inference.serving_model`).
        input_range: `"pixels"` or `"unit"`.
        shapes: dict. `output_shapes(model)`.

    Returns:
        A `keras.Model`, called once so that Keras' exporters take it.

    Example:

    >>> image = keras.Input((4, 4, 1))
    >>> scores = keras.layers.Dense(3, name="length")(
    ...     keras.layers.Flatten()(image))
    >>> model = keras.Model(image, scores)
    >>> graph = serving_graph(model, "unit", output_shapes(model))
    >>> graph.input.name
    'image'
    """
    image_shape = tuple(model.inputs[0].shape[1:])
    image = keras.Input(image_shape, dtype="float32", name=roles.IMAGE)
    scaled = image * 255.0 if input_range == "unit" else image
    outputs = model(scaled, training=False)
    if not isinstance(outputs, dict):
        outputs = {next(iter(shapes)): outputs}
    # (batch,): whether every value of each image is finite. (No reshape
    # between the test and the reduction: LiteRT's int8 quantization would
    # quantize it, and an int8 tensor holds no NaN.)
    finite = keras.ops.all(keras.ops.isfinite(image),
                           axis=tuple(range(1, len(image_shape) + 1)))
    served = []
    for name, shape in shapes.items():
        keep = keras.ops.reshape(finite, (-1,) + (1,) * len(shape))
        served.append(keras.ops.where(
            keep, keras.ops.cast(outputs[name], "float32"), float("nan")))
    graph = keras.Model(image, served, name=f"{model.name}_served")
    graph(keras.ops.zeros((1, *image_shape), "float32"))  # Keras exports
    # called models only.
    return graph
