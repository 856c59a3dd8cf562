"""Class scores from a keras_caps export: a SavedModel (needs TensorFlow),
an ONNX model (ONNX Runtime), a LiteRT model (the LiteRT interpreter) or an
OpenVINO model (OpenVINO's runtime)."""

import json
import os

import numpy as np

from keras_caps import model_roles as roles
from keras_caps.inference import export_runners
from keras_caps.inference.export_contents import MARKER as _MARKER
from keras_caps.inference.export_contents import is_keras_caps_export


class ExportedClassifier:
    """An export written by `keras_caps.export.export_inference_model`.

    Loads a SavedModel export with `tf.saved_model.load` and calls its
    `serve` signature (needs TensorFlow, whatever the Keras backend), an
    ONNX export (`"format": "onnx"` in its marker) with ONNX Runtime, a
    LiteRT export (`"litert"`) with the LiteRT interpreter, or an OpenVINO
    export (`"openvino"`) with OpenVINO's CPU runtime (none of the three
    needs TensorFlow; see `keras_caps.inference.export_runners`), taking
    raw pixels in [0, 255] whatever input range the
    export was written for (the `input_range` of its
    `keras_caps_export.json`: `"unit"` exports get the pixels divided by
    255).

    Only an unchanged export of keras_caps is loaded: every file under the
    folder must be one its `keras_caps_export.json` lists, with the size
    and SHA-256 it recorded (`is_keras_caps_export`), so a SavedModel from
    elsewhere, or one given a hand-written marker, is refused before
    TensorFlow loads it. The manifest does not prove who wrote the folder:
    a SavedModel is a program, and loading one runs its graph, so load
    only exports you trust.

    Attributes:
        path: str. The export folder.
        marker: dict. Its `keras_caps_export.json` record (the source
            model's path, the input range, the format, ...).
        export_format: str. `"saved_model"`, `"onnx"`, `"litert"` or
            `"openvino"`.
        image_shape: `(height, width, channels)` the signature takes.
        score_name: str. The class-score output (`"length"`, `"logits"` or
            `"probabilities"`).
        num_classes: int. The length of the class scores.
        has_reconstruction: bool. Whether it serves `"reconstruction"`.

    Example:

    ```python
    classifier = ExportedClassifier("exported/mnist")
    outputs = classifier(np.zeros((2, 28, 28, 1), "float32"))
    outputs["length"].shape  # (2, 10)
    ```
    """

    def __init__(self, path, argument_name="model"):
        self.path = os.fspath(path)
        where = f"`{argument_name}` {self.path!r}"
        record = _checked_marker(self.path, where)
        self.marker = record
        self._input_range = record.get("input_range", "pixels")
        self.export_format = export_format = record.get("format",
                                                        "saved_model")
        if export_format == "saved_model":
            self._loaded = _load_saved_model(self.path, where)
        elif export_format == "onnx":
            self._loaded = export_runners.load_onnx(self.path, where)
        elif export_format == "litert":
            self._loaded = export_runners.load_litert(
                self.path, where, record.get("outputs") or [])
        elif export_format == "openvino":
            self._loaded = export_runners.load_openvino(self.path, where)
        else:
            raise ValueError(
                f"{where} is an export in the format {export_format!r}, "
                "which this version of keras_caps cannot run; expected one "
                "of 'saved_model', 'onnx', 'litert', 'openvino'.")
        self.image_shape = self._loaded.image_shape
        shapes = self._loaded.output_shapes
        scores = [name for name in roles.CLASS_SCORE_LAYERS
                  if name in shapes]
        if len(scores) != 1:
            raise ValueError(
                f"The export {where} serves no class scores: expected one "
                f"output named one of {list(roles.CLASS_SCORE_LAYERS)}. "
                f"Received outputs {sorted(shapes)}")
        self.score_name = scores[0]
        self.num_classes = int(shapes[self.score_name][-1])
        self.has_reconstruction = roles.RECONSTRUCTION in shapes

    def __call__(self, images):
        """The outputs for raw-pixel images `(batch, height, width,
        channels)`: a dict of float32 NumPy arrays."""
        images = np.asarray(images, dtype="float32")
        if self._input_range == "unit":
            images = images / 255.0
        return self._loaded.run(images)


def _load_saved_model(path, where):
    """The `serve` signature of a SavedModel export, as a `LoadedExport`."""
    try:
        # Reading a SavedModel is the one thing of keras_caps.inference
        # that needs TensorFlow: imported here, only for an export, so
        # the rest works without it (tests/api_test.py allows this file
        # that one lazy import).
        import tensorflow as tf
    except ImportError:
        raise ValueError(
            f"{where} is a SavedModel export, which needs TensorFlow "
            "(pip install tensorflow); without it, use the model's "
            ".keras file.") from None
    try:
        loaded = tf.saved_model.load(path)
    except (OSError, ValueError, tf.errors.OpError) as error:
        raise ValueError(f"Cannot load the SavedModel {where}: "
                         f"{' '.join(str(error).split())[:300]}") from None
    if "serve" not in loaded.signatures:
        raise ValueError(
            f"The SavedModel {where} has no `serve` signature; expected "
            "an export of `keras-caps export`. Received signatures "
            f"{sorted(loaded.signatures)}")
    serve = loaded.signatures["serve"]
    spec = serve.structured_input_signature[1][roles.IMAGE]

    def run(images):
        # `loaded` stays alive with `run`: it holds the variables.
        outputs = loaded.signatures["serve"](
            **{roles.IMAGE: tf.constant(images)})
        return {name: np.asarray(value) for name, value in outputs.items()}

    return export_runners.LoadedExport(
        tuple(spec.shape[1:]),
        {name: tuple(value.shape[1:])
         for name, value in serve.structured_outputs.items()}, run)


def _checked_marker(path, where):
    """The marker's record, once the folder is an unchanged export whose
    `input_range` (`"pixels"` if it predates the field) is known."""
    marker = os.path.join(path, _MARKER)
    if not os.path.isdir(path) or not os.path.isfile(marker):
        models = sorted(name for name in os.listdir(path)
                        if name.endswith(".keras")) if os.path.isdir(
                            path) else []
        hint = (f" It holds {models[0]!r}: pass that file instead."
                if models else "")
        raise ValueError(
            f"{where} is not a keras_caps SavedModel export: no {_MARKER} in "
            "it. Expected a .keras file or a folder written by "
            f"`keras-caps export`.{hint}")
    try:
        with open(marker, encoding="utf-8") as file:
            record = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"Cannot read {marker!r}: {error}") from None
    if not is_keras_caps_export(path):
        raise ValueError(
            f"{where} is not an unchanged export of keras_caps: its files "
            f"are not exactly those its {_MARKER} lists with their sizes "
            "and SHA-256 (a file added, removed or edited, or a marker "
            "written by hand). A SavedModel is a program that loading it "
            "runs: load only exports you trust, and export the model again "
            "with `keras-caps export`.")
    input_range = (record.get("input_range", "pixels")
                   if isinstance(record, dict) else None)
    if input_range not in ("pixels", "unit"):
        raise ValueError(
            f"{marker!r} names an unknown input_range {input_range!r}; "
            "expected 'pixels' or 'unit'.")
    return record
