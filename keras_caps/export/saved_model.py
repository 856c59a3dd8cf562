"""SavedModel export of the inference graph (image in, class scores out)."""

import json
import math
import os
import shutil
import tempfile

import keras
import tensorflow as tf

from keras_caps import model_roles as roles
from keras_caps.inference import serving_model
from keras_caps.validation import check_choice
from keras_caps.version import __version__

MARKER = "keras_caps_export.json"
"""The file every export carries, naming what keras_caps wrote there."""

INPUT_RANGES = ("pixels", "unit")
"""What the served signature takes: raw pixels in [0, 255], or [0, 1]."""


def export_inference_model(model, path, reconstruction=False, precision=None,
                           overwrite=False, model_path=None,
                           input_range="pixels"):
    """Exports the inference graph of `model` as a TensorFlow SavedModel.

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

    Nothing that keras_caps did not write is ever deleted: `path` must be
    absent, an empty folder, or (with `overwrite=True`) a previous export of
    keras_caps, recognised by the `keras_caps_export.json` file it holds
    (with the package version, the source model path, the input range and
    the names of the
    files written) and by holding nothing else. See `check_export_target`.

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

    Returns:
        The exported inference model (a `keras.Model`).

    Raises:
        ValueError: `path` exists and is not an empty folder or a previous
            export of keras_caps to overwrite; `reconstruction=True` for a
            model without a decoder; an unknown `input_range`; a Keras
            backend other than TensorFlow.

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
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "The SavedModel export needs the TensorFlow backend: run it "
            "with KERAS_BACKEND=tensorflow (a model trained on another "
            "backend loads there from its .keras file). Received: "
            f"backend {keras.backend.backend()!r}")
    check_export_target(path, overwrite=overwrite, model_path=model_path)
    model = serving_model(model, reconstruction=reconstruction,
                          precision=precision)
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        written = os.path.join(staging, "model")
        _write_saved_model(model, written, input_range)
        files = sorted(os.listdir(written)) + [MARKER]
        with open(os.path.join(written, MARKER), "w") as file:
            json.dump({"keras_caps_version": __version__,
                       "model_path": (None if model_path is None
                                      else os.path.abspath(model_path)),
                       "input_range": input_range,
                       "files": sorted(files)}, file, indent=2)
        # Checked again: the folder may have changed during the export.
        check_export_target(path, overwrite=overwrite, model_path=model_path)
        if os.path.exists(path):
            retired = tempfile.mkdtemp(prefix=".retired-", dir=parent)
            os.replace(path, os.path.join(retired, "model"))
            os.replace(written, path)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(written, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model


def _write_saved_model(model, path, input_range):
    """Writes `model` as a SavedModel with the documented `serve` signature.

    The signature wraps the model: [0, 1] inputs are scaled to pixels
    (`input_range="unit"`), the outputs are always a dict named after the
    model's output layers, the outputs of images holding a NaN or an
    infinity are NaN, and an empty batch gives empty outputs without running
    the model (some convolution kernels reject a batch of 0).
    """
    image_shape = tuple(model.inputs[0].shape[1:])  # (height, width, channels)
    if isinstance(model.output, dict):
        output_shapes = {name: tuple(tensor.shape[1:])
                         for name, tensor in model.output.items()}
    else:
        output_shapes = {model.output_names[0]: tuple(model.output.shape[1:])}
    image_size = math.prod(image_shape)
    scale = 255.0 if input_range == "unit" else 1.0

    def serve(image):  # image: (batch, height, width, channels)
        def run_model():
            outputs = model(image * scale, training=False)
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

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serve", serve, input_signature=[
            tf.TensorSpec((None, *image_shape), "float32",
                          name=roles.IMAGE)])
    archive.write_out(path, verbose=False)


def is_keras_caps_export(path):
    """Whether `path` is a folder holding an export of keras_caps only.

    That is: it holds a readable `keras_caps_export.json` marker and nothing
    but the files that marker lists (what the export wrote).
    """
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        with open(os.path.join(path, MARKER)) as file:
            marker = json.load(file)
        written = set(marker["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return MARKER in written and set(os.listdir(path)) <= written


def check_export_target(path, overwrite=False, model_path=None):
    """Raises a `ValueError` unless an export may be written at `path`.

    Allowed: a path that does not exist, an empty folder, and (only with
    `overwrite=True`) a previous export of keras_caps (see
    `is_keras_caps_export`). Refused: a file, a link, a folder holding
    anything else (a SavedModel from elsewhere included), the current
    folder or one above it, and `model_path`, its folder or one above it.
    """
    real = os.path.realpath(path)

    def within(folder, inner):
        inner = os.path.realpath(inner)
        return os.path.commonpath([folder, inner]) == folder

    prefix = f"Refusing to export to {path!r}:"
    if model_path is not None and within(real, model_path):
        raise ValueError(f"{prefix} it holds the model file {model_path!r}; "
                         "choose a new folder for the export.")
    if within(real, os.getcwd()):
        raise ValueError(f"{prefix} it is the current folder or one above "
                         "it; choose a new folder for the export.")
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        raise ValueError(f"{prefix} it exists and is not a folder; choose a "
                         "new folder for the export.")
    if not os.listdir(path):
        return
    if is_keras_caps_export(path):
        if overwrite:
            return
        raise ValueError(f"{prefix} it holds a previous export; pass "
                         "`--overwrite` (`overwrite=True`) to replace it.")
    raise ValueError(f"{prefix} the folder is not empty and is not an export "
                     "written by keras_caps (a previous export holds "
                     f"`{MARKER}` and nothing else); keras_caps never "
                     "deletes files it did not write. Choose a new or empty "
                     "folder.")
