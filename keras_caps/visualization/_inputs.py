"""Model inputs for the figures: the image input, and one-example batches."""

import keras
import numpy as np


def image_input(model):
    """The image input of `model` (its `"image"` input, or its first)."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`"
            f". Received: model={model!r} of type {type(model).__name__}")
    if isinstance(model.input, dict) and "image" in model.input:
        return model.input["image"]
    return keras.tree.flatten(model.input)[0]


def as_batch(model, inputs, name="images"):
    """`inputs` as a float32 batch for the image input of `model`.

    A single example (one axis fewer than the input) gets a batch axis.
    """
    inputs = np.asarray(inputs, dtype="float32")
    expected = tuple(image_input(model).shape)
    if inputs.ndim == len(expected) - 1:
        inputs = inputs[None]
    matches = inputs.ndim == len(expected) and all(
        want is None or got == want
        for got, want in zip(inputs.shape[1:], expected[1:], strict=True))
    if not matches or inputs.shape[0] == 0:
        raise ValueError(
            f"`{name}` must be one example or a non-empty batch for the "
            f"model's input of shape {expected}. Received: "
            f"{name}.shape={inputs.shape}")
    return inputs


def to_numpy(tensor):
    return np.asarray(keras.ops.convert_to_numpy(tensor))
