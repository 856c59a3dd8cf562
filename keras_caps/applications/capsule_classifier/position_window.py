"""The stem and a per-position window, for the CNN ladder's heads.

Efficient-CapsNet's primary capsules are a depthwise convolution whose
window covers the stem's whole last feature map (Mazzia et al., 2021):
every channel has its own weight for every position. The CNN ladder's
steps 1 to 3 (`PositionCNN`, `VectorCNN`) read the map through the same
window, without the capsules' reshape and squash, so that their heads see
the map position by position as `CapsuleClassifier`'s do, where the
`CNNBaseline` averages the positions away.
"""

import keras

from keras_caps.applications.capsule_classifier import efficient_capsnet_stem
from keras_caps.applications.efficient_capsnet import efficient_capsnet

WINDOW = "position_window"
"""The name of the per-position window layer (a `DepthwiseConv2D`)."""


def position_features(images, dataset, preset, input_shape,
                      input_statistics, stem_normalization="batch"):
    """Images -> the stem's map read by the primary capsules' window.

    Args:
        images: The `keras.Input` of raw pixels.
        dataset: str. The preset's name, for error messages.
        preset: dict. A `CapsuleClassifier` preset.
        input_shape: tuple. The images' shape.
        input_statistics: `(mean, variance)` or `None`.
        stem_normalization: str. The stem's `"batch"` or `"group"`
            normalisation (`efficient_capsnet_stem`).

    Returns:
        The features `(batch, num_capsules * capsule_dim)`: the values of
        the primary capsules before their reshape and squash (128 on
        every preset).
    """
    x = efficient_capsnet_stem.efficient_capsnet_stem(
        images, dataset, preset, input_shape, input_statistics,
        normalization=stem_normalization)
    arguments = efficient_capsnet.primary_caps_arguments(
        preset, input_shape, tuple(x.shape[1:]))
    # The window of `PrimaryCaps`: one filter per channel, "valid", the
    # same initialisation. On MNIST (9, 9, 128) -> (1, 1, 128).
    x = keras.layers.DepthwiseConv2D(
        kernel_size=arguments["kernel_size"],
        strides=arguments.get("strides", 1), padding="valid",
        depthwise_initializer="glorot_uniform", name=WINDOW)(x)
    return keras.layers.Flatten(name="positions")(x)  # (batch, 128)
