"""Class scores from a keras_caps SavedModel export (needs TensorFlow)."""

import json
import os

import numpy as np

from keras_caps import model_roles as roles

# `keras_caps.export.saved_model.MARKER`, without importing TensorFlow.
_MARKER = "keras_caps_export.json"


class ExportedClassifier:
    """A SavedModel written by `keras_caps.export.export_inference_model`.

    Loads the export with `tf.saved_model.load` and calls its `serve`
    signature, taking raw pixels in [0, 255] whatever input range the
    export was written for (the `input_range` of its
    `keras_caps_export.json`: `"unit"` exports get the pixels divided by
    255). Needs TensorFlow, whatever the Keras backend.

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

    def __call__(self, images):
        """The outputs for raw-pixel images `(batch, height, width,
        channels)`: a dict of float32 NumPy arrays."""
        images = np.asarray(images, dtype="float32")
        if self._input_range == "unit":
            images = images / 255.0
        outputs = self._serve(**{roles.IMAGE: self._tf.constant(images)})
        return {name: np.asarray(value) for name, value in outputs.items()}


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
    input_range = (record.get("input_range", "pixels")
                   if isinstance(record, dict) else None)
    if input_range not in ("pixels", "unit"):
        raise ValueError(
            f"{marker!r} names an unknown input_range {input_range!r}; "
            "expected 'pixels' or 'unit'.")
    return input_range
