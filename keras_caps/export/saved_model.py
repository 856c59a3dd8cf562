"""Export of the inference graph (image in, class scores out): a
TensorFlow SavedModel or an ONNX model.

TensorFlow is imported only to write a SavedModel, so the ONNX export on
JAX or PyTorch runs without it.
"""

import errno
import functools
import math
import os
import shutil
import tempfile
import time

import keras

from keras_caps import model_roles as roles
from keras_caps.export.calibration import check_representative_images
from keras_caps.export.export_support import FLOAT32_FORMATS
from keras_caps.export.export_support import check_export_support
from keras_caps.export.export_support import check_quantize
from keras_caps.export.litert_model import write_litert
from keras_caps.export.onnx_model import check_onnx_convertible
from keras_caps.export.onnx_model import write_onnx
from keras_caps.export.openvino_model import write_openvino
from keras_caps.export.serving_graph import output_shapes
from keras_caps.inference import serving_model
from keras_caps.inference.class_names import EXPORT_CLASS_NAMES_FILE
from keras_caps.inference.class_names import check_class_names
from keras_caps.inference.class_names import write_class_names
from keras_caps.runs.export_manifest import check_export_target
from keras_caps.runs.export_manifest import write_marker
from keras_caps.validation import check_choice
from keras_caps.version import __version__

INPUT_RANGES = ("pixels", "unit")
"""What the served signature takes: raw pixels in [0, 255], or [0, 1]."""


def export_inference_model(model, path, reconstruction=False, precision=None,
                           overwrite=False, model_path=None,
                           input_range="pixels", class_names=None,
                           format="saved_model", quantize=None,
                           representative_images=None):
    """Exports the inference graph of `model` as a SavedModel, or in ONNX,
    LiteRT or OpenVINO.

    What gets exported is `keras_caps.inference.serving_model(model,
    reconstruction, precision)`: the image-to-scores graph with the batch
    normalisations folded into the following convolutions.

    The serving signature `serve` (also the default signature
    `serving_default`) takes one input, `image`: float32 images of shape
    `(batch, height, width, channels)`, raw pixels in [0, 255] (or in
    [0, 1] with `input_range="unit"`), any batch size including 0. It always
    returns a dict: the class scores under the name of the model's score
    layer (`"length"`, float32 `(batch, num_classes)`, for models with
    capsule lengths such as EfficientCapsNet and CapsNet; `"logits"` for
    VectorRoutingCapsNet and InvertedAttentionCapsNet; `"probabilities"`
    for CNNBaseline), plus
    `"reconstruction"` (images in [0, 1], the decoder reading the longest
    capsule(s)) with `reconstruction=True`. Every output of an image that
    holds a NaN or an infinity is NaN; a batch of 0 images gives outputs
    with 0 rows. The export is written to a temporary folder beside `path`
    and renamed into place, so `path` never holds a half-written export.

    With `format="onnx"` the folder holds `model.onnx` instead (written by
    Keras' own ONNX exporter, `model.export(format="onnx")`, on the
    TensorFlow, JAX or PyTorch backend; no TensorFlow needed on JAX and
    PyTorch) with the same contract: one input `image`, float32 `(batch,
    height, width, channels)` with a dynamic batch dimension `batch`, and
    the outputs named as above (`"length"`, `"reconstruction"`, ...),
    float32, NaN for non-finite images. It computes in float32 (Keras'
    ONNX exporter takes float32 models only). Run it with ONNX Runtime:
    `onnxruntime.InferenceSession(path + "/model.onnx").run(None,
    {"image": images})`. A SavedModel is written on the TensorFlow and
    JAX backends, with TensorFlow installed. `check_export_support` says
    up front whether a format can be written here.

    Nothing that keras_caps did not write is ever deleted: `path` must be
    absent, an empty folder, or (with `overwrite=True`) a previous export of
    keras_caps, recognised by the `keras_caps_export.json` file it holds
    (with the package version, the source model path, the input range and
    every file written, in every subfolder, with its size and SHA-256) and
    by holding exactly those files, unchanged, and nothing else. See
    `is_keras_caps_export` and `check_export_target`.

    Args:
        model: A model from an application builder (or its inference
            model).
        path: str. The SavedModel folder.
        reconstruction: bool. Also serve the reconstruction.
        precision: `None` (keep the model's dtype policies), `"float32"`,
            or `"mixed_bfloat16"` / `"mixed_float16"` (the convolutions
            compute in 16 bits, which is faster on CPUs with bfloat16
            instructions and on GPUs; README.md has measured times). See
            `serving_model`.
        overwrite: bool. Replace a previous export of keras_caps at `path`.
        model_path: str or `None`. The file `model` was loaded from:
            recorded in the marker file, and `path` may not be it, its
            folder or any folder above it.
        input_range: `"pixels"` (default): the signature takes raw pixels
            in [0, 255], as the models do; `"unit"`: it takes images in
            [0, 1] and multiplies them by 255 before the model.
        class_names: list of str or `None`. The class names, in class-index
            order, kept in the export as `assets.extra/class_names.json`
            (`keras_caps.inference.EXPORT_CLASS_NAMES_FILE`, which
            `keras-caps predict` reads); listed in the marker file like
            every other file of the export. Their number must match the
            model's class scores.
        format: `"saved_model"` (default), `"onnx"`, `"litert"`
            (`model.tflite`, for the LiteRT interpreter; outputs named by
            position, in the marker's `"outputs"` order) or `"openvino"`
            (`model.xml` and `model.bin`), recorded in the marker file.
            LiteRT and OpenVINO convert on the TensorFlow backend, in
            float32, with the ONNX contract below; docs/serving.md has
            their details.
        quantize: `None` or `"int8"` (LiteRT only): 8-bit weights with
            per-channel scales, float32 activations; the marker records the
            8-bit weight tensors.
        representative_images: `None`, or with `quantize="int8"` images
            `(count, height, width, channels)` in the export's
            `input_range`, a sample of the training images (a few
            hundred): they calibrate 8-bit activations, used wherever
            LiteRT has an int8 kernel (the squash and the routing stay
            float32). The marker records the operations computing in
            int8 and in float32.

    Returns:
        The exported inference model (a `keras.Model`).

    Raises:
        ValueError: `path` exists and is not an empty folder or a previous
            export of keras_caps to overwrite; `reconstruction=True` for a
            model without a decoder; an unknown `input_range` or
            `format`; a format this backend or installation cannot write
            (see `check_export_support`), or `format="onnx"` with a 16-bit
            `precision`; `representative_images` without
            `quantize="int8"`, of another shape than the model's input or
            outside `input_range`. Checked before anything is written.
        OSError: the export could not be written (a full or read-only
            disk); its `filename` is `path`. Nothing is left beside `path`,
            and a previous export there stays as it was.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> path = os.path.join(tempfile.mkdtemp(), "export")
    >>> _ = export_inference_model(model, path,  # doctest: +SKIP
    ...                            input_range="unit")
    >>> served = tf.saved_model.load(path)  # doctest: +SKIP
    >>> sorted(served.serve(tf.zeros((0, 28, 28, 1))))  # doctest: +SKIP
    ['length']
    """
    check_choice("input_range", input_range, INPUT_RANGES)
    check_export_support(format, precision=precision)
    check_quantize(quantize, format)
    representative_images = check_representative_images(
        representative_images, quantize,
        tuple(roles.image_input(model).shape[1:]), input_range)
    if format == "onnx":
        check_onnx_convertible(model)
    if format in FLOAT32_FORMATS:
        precision = "float32"  # Their Keras exporters take float32 only.
    check_export_target(path, overwrite=overwrite, model_path=model_path)
    if class_names is not None:
        class_names = _check_export_class_names(model, class_names)
    model = serving_model(model, reconstruction=reconstruction,
                          precision=precision)
    record = {"keras_caps_version": __version__,
              "model_path": (None if model_path is None
                             else os.path.abspath(model_path)),
              "input_range": input_range, "format": format,
              "outputs": list(output_shapes(model))}
    write = _writer(format, quantize, representative_images)
    try:
        _stage_and_replace(model, os.path.abspath(path), input_range,
                           record, class_names, lambda: check_export_target(
                               path, overwrite=overwrite,
                               model_path=model_path), write)
    except (OSError, *_op_errors(format)) as error:
        raise _export_error(error, path) from error
    return model


def _writer(format, quantize, representative_images):
    """`write(model, folder, input_range)` for `format`."""
    if format == "onnx":
        return write_onnx
    if format == "openvino":
        return write_openvino
    if format == "litert":
        return functools.partial(
            write_litert, quantize=quantize,
            representative_images=representative_images)
    return _write_saved_model


def _op_errors(format):
    """The TensorFlow error a SavedModel or LiteRT write raises."""
    if format not in ("saved_model", "litert"):
        return ()
    import tensorflow as tf

    return (tf.errors.OpError,)


def _stage_and_replace(model, path, input_range, record, class_names,
                       check_target, write):
    """Writes the export (`write(model, folder, input_range)`) in a staging
    folder beside `path`, then moves it to `path` (after `check_target()`).
    The staging folder is always removed; a previous export at `path`
    stays if the move fails."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        written = os.path.join(staging, "model")
        os.makedirs(written, exist_ok=True)  # The SavedModel writer's too.
        # A writer may return what it learned for the marker (a LiteRT
        # export's 8-bit weights).
        record = {**record, **(write(model, written, input_range) or {})}
        if class_names is not None:  # Before the marker, which lists it.
            write_class_names(
                os.path.join(written, EXPORT_CLASS_NAMES_FILE), class_names)
        write_marker(written, record)
        check_target()  # Again: the folder may have changed meanwhile.
        if not os.path.exists(path):
            os.replace(written, path)
            return
        _replace_previous(written, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _replace_previous(written, path):
    """Moves the folder `written` to `path`, which holds an earlier export
    (or nothing): the earlier one is deleted only once `written` is in
    place, and is put back if the move fails."""
    retired = tempfile.mkdtemp(prefix=".retired-", dir=os.path.dirname(path))
    previous = os.path.join(retired, "model")
    try:
        os.replace(path, previous)
    except BaseException:
        os.rmdir(retired)
        raise
    try:
        os.replace(written, path)
    except BaseException as error:
        _put_back(previous, retired, path, error)  # The previous stays.
        raise
    shutil.rmtree(retired, ignore_errors=True)


def _put_back(previous, retired, path, error):
    """Moves the earlier export `previous` back to `path` after `error`.

    If that fails too, the earlier export is moved out of the temporary
    folder `retired` (which a run deletes as its own) to
    `<path>.previous-<time>`, and an `OSError` says where it is.
    """
    try:
        os.replace(previous, path)
    except OSError as rollback_error:
        kept = f"{path}.previous-{time.strftime('%Y%m%dT%H%M%S')}"
        try:
            os.rename(previous, kept)
        except OSError:
            kept = previous  # Still in `retired`: say so.
        else:
            shutil.rmtree(retired, ignore_errors=True)
        raise OSError(
            rollback_error.errno,
            f"Replacing the export {path!r} failed "
            f"({type(error).__name__}: {error}), and putting the previous "
            f"export back failed too ({rollback_error}): the previous "
            f"export is kept in {kept!r}. Move it back to {path!r} "
            "yourself.") from error
    os.rmdir(retired)


# TensorFlow reports a failed write as an `OpError` naming its own
# temporary file: these are turned into the `OSError` they stand for.
_OP_ERRNOS = ((errno.ENOSPC, "No space left on device"),
              (errno.EROFS, "Read-only file system"),
              (errno.EACCES, "Permission denied"),
              (errno.EDQUOT, "Disk quota exceeded"))


def _export_error(error, path):
    """An `OSError` naming the export folder `path` for a failed write."""
    if isinstance(error, OSError):
        if error.errno is None:
            return OSError(f"Could not write the export {path!r}: {error}")
        return OSError(error.errno, error.strerror or str(error), path)
    for code, words in _OP_ERRNOS:
        if words in error.message:
            return OSError(code, words, path)
    return OSError(f"Could not write the export {path!r}: {error.message}")


def _write_saved_model(model, path, input_range):
    """Writes `model` as a SavedModel with the documented `serve` signature.

    The signature wraps the model: [0, 1] inputs are scaled to pixels
    (`input_range="unit"`), the outputs are always a dict named after the
    model's output layers, the outputs of images holding a NaN or an
    infinity are NaN, and an empty batch gives empty outputs without running
    the model (some convolution kernels reject a batch of 0). On JAX the
    model is converted by Keras' exporter (jax2tf) and wrapped in the same
    TensorFlow signature.
    """
    import tensorflow as tf

    image_shape = tuple(model.inputs[0].shape[1:])  # (height, width, channels)
    spec = tf.TensorSpec((None, *image_shape), "float32", name=roles.IMAGE)
    archive = keras.export.ExportArchive()
    archive.track(model)
    if keras.backend.backend() == "jax":
        # A TensorFlow function running the JAX model (not an endpoint of
        # its own: the export serves only `serve`).
        call_model = archive._backend_add_endpoint(
            "model", lambda image: model(image, training=False), [spec])
    else:
        def call_model(image):
            return model(image, training=False)
    serve = _serve_function(call_model, image_shape, output_shapes(model),
                            255.0 if input_range == "unit" else 1.0)
    if keras.backend.backend() == "jax":
        serve = tf.function(serve, input_signature=[spec], autograph=False)
        serve.get_concrete_function()  # Traced, as `add_endpoint` needs.
        archive.add_endpoint("serve", serve)
    else:
        archive.add_endpoint("serve", serve, input_signature=[spec])
    archive.write_out(path, verbose=False)


def _serve_function(call_model, image_shape, output_shapes, scale):
    """The TensorFlow function of the `serve` signature around
    `call_model` (images to the model's outputs)."""
    import tensorflow as tf

    image_size = math.prod(image_shape)

    def serve(image):  # image: (batch, height, width, channels)
        image = _checked_image(image, image_shape)

        def run_model():
            outputs = call_model(image * scale)
            if not isinstance(outputs, dict):
                outputs = {next(iter(output_shapes)): outputs}
            return {name: tf.cast(outputs[name], "float32")
                    for name in output_shapes}

        def empty_outputs():
            return {name: tf.zeros((0, *shape), "float32")
                    for name, shape in output_shapes.items()}

        batch_size = tf.shape(image)[0]
        outputs = tf.cond(batch_size > 0, run_model, empty_outputs)
        # (batch,): whether every value of each image is finite.
        finite = tf.reduce_all(
            tf.math.is_finite(tf.reshape(image, (batch_size, image_size))),
            axis=1)
        return {name: tf.where(
                    tf.reshape(finite, (-1,) + (1,) * len(shape)),
                    value, tf.constant(float("nan"), "float32"))
                for (name, value), shape in zip(
                    outputs.items(), output_shapes.values(), strict=True)}

    return serve


def _checked_image(image, image_shape):
    """`image`, checked against the signature's spec before anything runs.

    A signature called through `loaded.signatures[...]` (or TensorFlow
    Serving) runs its graph on whatever it is given: TensorFlow checks the
    TensorSpec only for Python callers of `loaded.serve`. A wrong shape
    then failed deep in the graph, or aborted the process in a oneDNN
    convolution. This check raises `InvalidArgumentError` naming the
    expected spec instead.

    The graph believes the spec's static shape, and TensorFlow folds
    anything it can infer from it (the rank, the image size) into a
    constant, so a plain shape check would always pass. The runtime shape
    is read through a serialisation round trip of the 1-D shape vector
    (a few bytes), whose result TensorFlow cannot infer.
    """
    import tensorflow as tf

    expected = (None, *image_shape)
    # (rank,): the shape `image` really has, opaque to shape inference.
    shape = tf.io.parse_tensor(tf.io.serialize_tensor(tf.shape(image)),
                               tf.int32)
    # Sizes compared only where the rank matches (else the shapes differ).
    matches = tf.cond(
        tf.equal(tf.size(shape), len(expected)),
        lambda: tf.reduce_all(tf.equal(shape[1:], image_shape)),
        lambda: tf.constant(False))
    check = tf.debugging.Assert(matches, [
        "The `image` input of this export must be float32 images of shape "
        f"{expected}: TensorSpec(shape={expected}, dtype=tf.float32, "
        "name='image'). Received shape:", shape], summarize=16)
    with tf.control_dependencies([check]):
        return tf.identity(image)


def _check_export_class_names(model, class_names):
    """`class_names` as a list, checked against the model's class scores."""
    names = check_class_names(class_names, "`class_names`")
    num_classes = keras.tree.flatten(model.output)[0].shape[-1]
    if len(names) != num_classes:
        raise ValueError(
            f"Received {len(names)} `class_names` for a model with "
            f"{num_classes} class scores; expected one name per class. "
            f"Received: class_names={names!r}")
    return names


