"""8-bit activations in a LiteRT export: the images that calibrate them,
checked before anything is converted or written, and the conversion.

Full-integer quantization (Jacob et al. 2018, "Quantization and training of
neural networks for efficient integer-arithmetic-only inference", §2.1)
stores each activation tensor as 8-bit integers with a scale and a zero
point, which TensorFlow's converter chooses from the range the tensor takes
on a representative sample of the inputs: a few hundred training images.
"""

import functools
import os
import tempfile
import warnings

import keras
import numpy as np

from keras_caps.inference import check_pixel_range

_INPUT_RANGE_MAXIMA = {"pixels": 255.0, "unit": 1.0}

# The operations that compute in int8: the convolutions, the dense layers
# and the matrix products (the capsule votes, and a router's agreements
# where it computes them as one), and the reshapes and transposes between
# them. Every other operation stays float32: the
# routing's element-wise maths (softmaxes, exponentials and logarithms,
# the squash's division, EM's statistics), which 8-bit activations
# distort (an untrained EM head's outputs moved by 5 % of their range on
# random images with every quantizable operation in int8, by under 1 %
# with this list), and the export's NaN test (`x - x`, a
# comparison and a select: an int8 tensor holds no NaN). LiteRT's int8
# division would also refuse a divisor that quantizes to zero, as the
# squash's does for a blank image.
INT8_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
            "BATCH_MATMUL", "RESHAPE", "TRANSPOSE")


def check_representative_images(images, quantize, image_shape, input_range):
    """Returns `images` as a float32 `(count, height, width, channels)`
    array, or raises a one-line `ValueError`.

    Args:
        images: array-like or `None`. Images in the export's input range.
        quantize: the export's `quantize`: calibration needs `"int8"`.
        image_shape: `(height, width, channels)` of the model's input.
        input_range: `"pixels"` ([0, 255]) or `"unit"` ([0, 1]).

    Returns:
        `None` when `images` is `None`, else the float32 array.

    Example:

    >>> check_representative_images(np.zeros((4, 8, 8, 1)), "int8",
    ...                             (28, 28, 1), "pixels")
    Traceback (most recent call last):
    ...
    ValueError: `representative_images` (--calibration-images) must be \
images of the model's input, shape (count, 28, 28, 1). Received: shape \
(4, 8, 8, 1)
    """
    if images is None:
        return None
    if quantize != "int8":
        raise ValueError(
            "`representative_images` (--calibration-images) calibrate "
            "8-bit activations, which need quantize='int8' (--quantize "
            f"int8). Received: quantize={quantize!r}")
    values = np.asarray(images)
    if values.dtype.kind not in "uif":
        raise ValueError(
            "`representative_images` (--calibration-images) must be "
            f"numeric images. Received: dtype {values.dtype}")
    expected = ", ".join(str(size) for size in image_shape)
    if values.ndim != 4 or tuple(values.shape[1:]) != tuple(image_shape):
        raise ValueError(
            "`representative_images` (--calibration-images) must be images "
            f"of the model's input, shape (count, {expected}). Received: "
            f"shape {values.shape}")
    if len(values) == 0:
        raise ValueError(
            "`representative_images` (--calibration-images) holds no "
            "images: give at least one (a few hundred training images "
            "calibrate well).")
    _check_range(values, input_range)
    return values.astype("float32")


def _check_range(values, input_range):
    """Refuses non-finite images and images outside the export's input
    range (raw pixels that look scaled, or [0, 1] images above 1)."""
    name = "representative_images"
    if input_range == "pixels":
        check_pixel_range(values, name)
    elif not np.isfinite(values).all():
        check_pixel_range(values, name)  # Its non-finite message.
    maximum = _INPUT_RANGE_MAXIMA[input_range]
    low, high = float(values.min()), float(values.max())
    if low < 0.0 or high > maximum:
        raise ValueError(
            f"`{name}` must be in the export's input range, "
            f"input_range={input_range!r}: [0, {maximum:g}]. Received: "
            f"values from {low:g} to {high:g}")


def convert_calibrated_int8(graph, image_shape, images):
    """The LiteRT flatbuffer (bytes) of the Keras model `graph` with 8-bit
    weights and, for the operations of `INT8_OPS`, 8-bit activations
    calibrated on `images` (checked by `check_representative_images`).

    The other operations stay float32, with quantize and dequantize steps
    between: TensorFlow's converter is driven through its quantization
    debugger (`tf.lite.experimental.QuantizationDebugger`), the
    converter's public way to keep operations out of full-integer
    quantization. The input and outputs stay float32. The graph's input is
    `image`, `(None, *image_shape)` float32.
    """
    import tensorflow as tf

    def representative_dataset():  # One image per call, as `[input]`.
        for index in range(len(images)):
            yield [images[index:index + 1]]

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        # The converter's deprecation notices say nothing about the model.
        warnings.simplefilter("ignore")
        saved_model = _write_saved_model(graph, image_shape, folder)
        kinds = _operation_kinds(_converter(saved_model).convert())
        converter = _converter(saved_model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative_dataset
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter, debug_dataset=representative_dataset,
            debug_options=tf.lite.experimental.QuantizationDebugOptions(
                denylisted_ops=sorted(kinds - set(INT8_OPS))))
        return debugger.get_nondebug_quantized_model()


def _write_saved_model(graph, image_shape, folder):
    """Writes `graph`'s `serve` endpoint as a SavedModel in `folder` (as
    Keras' LiteRT exporter does); returns its path."""
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(graph)
    archive.add_endpoint(
        "serve", functools.partial(graph.__call__, training=False),
        input_signature=[tf.TensorSpec((None, *image_shape), tf.float32,
                                       name="image")])
    path = os.path.join(folder, "saved_model")
    archive.write_out(path, verbose=False)
    return path


def _converter(saved_model):
    """TensorFlow's LiteRT converter of the SavedModel, built-in kernels
    only."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.experimental_enable_resource_variables = True
    return converter


def _operation_kinds(content):
    """The kinds of operation (`"CONV_2D"`, ...) of a LiteRT flatbuffer."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # TensorFlow's own.
        import tensorflow as tf

        Interpreter = tf.lite.Interpreter
    return {operation["op_name"] for operation in
            Interpreter(model_content=content)._get_ops_details()}
