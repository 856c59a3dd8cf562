"""Class scores from a keras_caps export: a SavedModel (needs TensorFlow)
or an ONNX model (needs ONNX Runtime)."""

import json
import os

import numpy as np

from keras_caps import model_roles as roles
from keras_caps.inference.export_contents import MARKER as _MARKER
from keras_caps.inference.export_contents import is_keras_caps_export

# `keras_caps.export.onnx_model.ONNX_FILE`.
_ONNX_FILE = "model.onnx"


class ExportedClassifier:
    """An export written by `keras_caps.export.export_inference_model`.

    Loads a SavedModel export with `tf.saved_model.load` and calls its
    `serve` signature (needs TensorFlow, whatever the Keras backend), or an
    ONNX export (`"format": "onnx"` in its marker) with ONNX Runtime (no
    TensorFlow), taking raw pixels in [0, 255] whatever input range the
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
        self._input_range = _input_range(self.path, where)
        if _export_format(self.path) == "onnx":
            self._load_onnx(where)
            return
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
        self._tf = tf
        try:
            loaded = tf.saved_model.load(self.path)
        except (OSError, ValueError, tf.errors.OpError) as error:
            raise ValueError(f"Cannot load the SavedModel {where}: "
                             f"{' '.join(str(error).split())[:300]}") from None
        if "serve" not in loaded.signatures:
            raise ValueError(
                f"The SavedModel {where} has no `serve` signature; expected "
                "an export of `keras-caps export`. Received signatures "
                f"{sorted(loaded.signatures)}")
        self._loaded = loaded  # Keeps the signature's variables alive.
        self._serve = loaded.signatures["serve"]
        spec = self._serve.structured_input_signature[1][roles.IMAGE]
        self.image_shape = tuple(spec.shape[1:])
        outputs = set(self._serve.structured_outputs)
        scores = [name for name in roles.CLASS_SCORE_LAYERS
                  if name in outputs]
        if len(scores) != 1:
            raise ValueError(
                f"The SavedModel {where} serves no class scores: expected one "
                f"output named one of {list(roles.CLASS_SCORE_LAYERS)}. "
                f"Received outputs {sorted(outputs)}")
        self.score_name = scores[0]
        self.num_classes = int(
            self._serve.structured_outputs[self.score_name].shape[-1])
        self.has_reconstruction = roles.RECONSTRUCTION in outputs

    def _load_onnx(self, where):
        """Loads `model.onnx` of an ONNX export with ONNX Runtime."""
        try:
            import onnxruntime
        except ImportError:
            raise ValueError(
                f"{where} is an ONNX export, which needs ONNX Runtime "
                "(pip install onnxruntime).") from None
        try:
            self._session = onnxruntime.InferenceSession(
                os.path.join(self.path, _ONNX_FILE))
        except Exception as error:  # ONNX Runtime's own error types.
            raise ValueError(f"Cannot load the ONNX model of {where}: "
                             f"{' '.join(str(error).split())[:300]}") from None
        self._serve = None
        self.image_shape = tuple(self._session.get_inputs()[0].shape[1:])
        shapes = {output.name: output.shape
                  for output in self._session.get_outputs()}
        scores = [name for name in roles.CLASS_SCORE_LAYERS if name in shapes]
        if len(scores) != 1:
            raise ValueError(
                f"The ONNX model of {where} serves no class scores: "
                f"expected one output named one of "
                f"{list(roles.CLASS_SCORE_LAYERS)}. Received outputs "
                f"{sorted(shapes)}")
        self.score_name = scores[0]
        self.num_classes = int(shapes[self.score_name][-1])
        self.has_reconstruction = roles.RECONSTRUCTION in shapes

    def __call__(self, images):
        """The outputs for raw-pixel images `(batch, height, width,
        channels)`: a dict of float32 NumPy arrays."""
        images = np.asarray(images, dtype="float32")
        if self._input_range == "unit":
            images = images / 255.0
        if self._serve is None:  # ONNX
            names = [output.name for output in self._session.get_outputs()]
            return dict(zip(names, self._session.run(
                names, {roles.IMAGE: images}), strict=True))
        outputs = self._serve(**{roles.IMAGE: self._tf.constant(images)})
        return {name: np.asarray(value) for name, value in outputs.items()}


def _export_format(path):
    """The marker's `format` (`"saved_model"` if it predates the field)."""
    with open(os.path.join(path, _MARKER), encoding="utf-8") as file:
        record = json.load(file)
    return record.get("format", "saved_model")


def _input_range(path, where):
    """The marker's `input_range` (`"pixels"` if it predates the field)."""
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
    return input_range
