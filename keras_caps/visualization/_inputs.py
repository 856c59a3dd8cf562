"""Model inputs for the figures: the image input, and one-example batches."""

import keras
import numpy as np

from keras_caps import model_roles as roles


def image_input(model):
    """The image input of `model` (its `"image"` input, or its first)."""
    return roles.image_input(model)


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
