"""The image input of the applications: its shape check and its scaling."""

import logging
import numbers

import keras
import numpy as np

from keras_caps import model_roles as roles


def check_image_shape(input_shape, default):
    """`input_shape` as a tuple of 3 positive ints, or `default` if None."""
    if input_shape is None:
        return tuple(default)
    if (not isinstance(input_shape, (tuple, list)) or len(input_shape) != 3
            or any(isinstance(size, bool)
                   or not isinstance(size, numbers.Integral) or size <= 0
                   for size in input_shape)):
        raise ValueError(
            "Received an invalid value for `input_shape`, expected a tuple "
            "of 3 positive integers (height, width, channels). Received: "
            f"input_shape={input_shape!r}")
    return tuple(int(size) for size in input_shape)


def input_scaling_layer(preset, input_shape, input_statistics):
    """The layer that scales raw pixels (0-255) inside the model.

    `"standardize"` presets with `input_statistics = (mean, variance)` per
    channel (raw pixel units) get a `Normalization` layer holding them as
    constants; otherwise pixels are divided by 255 (with a logged warning
    for `"standardize"` presets, which train worse that way). The layer is
    named `"input_scaling"`.
    """
    if preset["input_scaling"] == "standardize" and not input_statistics:
        logging.warning(
            "This preset standardises its input with training statistics, "
            "but no `input_statistics` were given: pixels are only divided "
            "by 255. Pass e.g. "
            "keras_caps.datasets.smallnorb.training_statistics().")
    if preset["input_scaling"] == "standardize" and input_statistics:
        mean, variance = (np.asarray(v, dtype="float32").reshape(-1)
                          for v in input_statistics)
        channels = input_shape[-1]
        if mean.shape != (channels,) or variance.shape != (channels,):
            raise ValueError(
                "`input_statistics` must hold a mean and a variance per "
                f"channel ({channels}). Received: mean of shape {mean.shape}"
                f", variance of shape {variance.shape}")
        return keras.layers.Normalization(
            mean=mean.tolist(), variance=variance.tolist(),
            name=roles.INPUT_SCALING)
    return keras.layers.Rescaling(1.0 / 255.0, name=roles.INPUT_SCALING)
