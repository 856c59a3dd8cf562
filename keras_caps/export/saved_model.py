"""SavedModel export of the inference graph (image in, class scores out)."""

import json
import os
import shutil
import tempfile

from keras_caps.inference import serving_model
from keras_caps.version import __version__

MARKER = "keras_caps_export.json"
"""The file every export carries, naming what keras_caps wrote there."""


def export_inference_model(model, path, reconstruction=False, precision=None,
                           overwrite=False, model_path=None):
    """Exports the inference graph of `model` as a TensorFlow SavedModel.

    What gets exported is `keras_caps.inference.serving_model(model,
    reconstruction, precision)`: the image-to-scores graph with the batch
    normalisations folded into the following convolutions.

    The serving signature `serve` (also the default signature) takes raw
    images, float32 pixels in [0, 255] of shape `(batch, height, width,
    channels)` with any batch size, and returns the class-capsule lengths
    `(batch, num_classes)`; with `reconstruction=True` it returns
    `{"length": ..., "reconstruction": ...}`, the decoder reading the longest
    capsule(s). The export is written to a temporary folder beside `path`
    and renamed into place, so `path` never holds a half-written export.

    Nothing that keras_caps did not write is ever deleted: `path` must be
    absent, an empty folder, or (with `overwrite=True`) a previous export of
    keras_caps, recognised by the `keras_caps_export.json` file it holds
    (with the package version, the source model path and the names of the
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

    Returns:
        The exported inference model (a `keras.Model`).

    Raises:
        ValueError: `path` exists and is not an empty folder or a previous
            export of keras_caps to overwrite.
    """
    check_export_target(path, overwrite=overwrite, model_path=model_path)
    model = serving_model(model, reconstruction=reconstruction,
                          precision=precision)
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        written = os.path.join(staging, "model")
        model.export(written, format="tf_saved_model", verbose=False)
        files = sorted(os.listdir(written)) + [MARKER]
        with open(os.path.join(written, MARKER), "w") as file:
            json.dump({"keras_caps_version": __version__,
                       "model_path": (None if model_path is None
                                      else os.path.abspath(model_path)),
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
