"""SavedModel export of the inference graph (image in, class scores out)."""

import os
import shutil
import tempfile

from keras_caps.inference import serving_model


def export_inference_model(model, path, reconstruction=False, precision=None):
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

    Args:
        model: A model from an application builder (or its inference
            model).
        path: str. The SavedModel folder. Replaced if it exists.
        reconstruction: bool. Also serve the reconstruction.
        precision: `None` (keep the model's dtype policies), `"float32"`,
            or `"mixed_bfloat16"` / `"mixed_float16"` (the convolutions
            compute in 16 bits, which is faster on CPUs with bfloat16
            instructions and on GPUs; README.md has measured times). See
            `serving_model`.

    Returns:
        The exported inference model (a `keras.Model`).
    """
    model = serving_model(model, reconstruction=reconstruction,
                          precision=precision)
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        model.export(os.path.join(staging, "model"), format="tf_saved_model",
                     verbose=False)
        if os.path.exists(path):
            retired = tempfile.mkdtemp(prefix=".retired-", dir=parent)
            os.replace(path, os.path.join(retired, "model"))
            os.replace(os.path.join(staging, "model"), path)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(os.path.join(staging, "model"), path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model
