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

# Operations kept in float32. LiteRT's int8 division refuses a divisor that
# quantizes to zero, and the squash divides by capsule lengths, which are 0
# for a blank image (and near 0 for many capsules of any image). The
# export's NaN contract (`serving_graph`: `x - x` finds the non-finite
# images, a select gives them NaN outputs) needs float32 tensors, which
# hold NaN where int8 ones cannot.
FLOAT32_OPS = ("DIV", "SUB", "EQUAL", "SELECT_V2")


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
    weights and, wherever LiteRT has an int8 kernel, 8-bit activations
    calibrated on `images` (checked by `check_representative_images`).

    The operations of `FLOAT32_OPS` stay float32: TensorFlow's converter is
    driven through its quantization debugger (`tf.lite.experimental.
    QuantizationDebugger`), the converter's public way to keep operations
    out of full-integer quantization. The input and outputs stay float32.
    The graph's input is `image`, `(None, *image_shape)` float32.
    """
    import tensorflow as tf

    def representative_dataset():  # One image per call, as `[input]`.
        for index in range(len(images)):
            yield [images[index:index + 1]]

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        # The converter's deprecation notices say nothing about the model.
        warnings.simplefilter("ignore")
        archive = keras.export.ExportArchive()
        archive.track(graph)
        archive.add_endpoint(
            "serve", functools.partial(graph.__call__, training=False),
            input_signature=[tf.TensorSpec((None, *image_shape),
                                           tf.float32, name="image")])
        archive.write_out(os.path.join(folder, "saved_model"),
                          verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(
            os.path.join(folder, "saved_model"))
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.experimental_enable_resource_variables = True
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative_dataset
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter, debug_dataset=representative_dataset,
            debug_options=tf.lite.experimental.QuantizationDebugOptions(
                denylisted_ops=list(FLOAT32_OPS)))
        return debugger.get_nondebug_quantized_model()
