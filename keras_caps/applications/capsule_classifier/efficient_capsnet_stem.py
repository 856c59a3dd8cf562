"""Efficient-CapsNet's stem and primary capsules, for any head."""

from keras_caps import layers
from keras_caps.applications.efficient_capsnet import efficient_capsnet
from keras_caps.applications.image_inputs import input_scaling_layer


def efficient_capsnet_stem(images, dataset, preset, input_shape,
                           input_statistics, *, normalization="batch"):
    """Scaled images -> the stem's feature map, as Efficient-CapsNet's.

    Args:
        images: The `keras.Input` of raw pixels.
        dataset: str. The preset's name, for error messages.
        preset: dict. An Efficient-CapsNet preset.
        input_shape: tuple. The images' shape.
        input_statistics: `(mean, variance)` or `None`, for
            standardising presets.
        normalization: str. `"batch"` (Efficient-CapsNet's
            BatchNormalization, the default) or `"group"` (a
            GroupNormalization of 8 channels per group in its place, no
            batch statistics; see `efficient_capsnet.stem_block`).

    Returns:
        The feature map `(batch, height, width, channels)`.
    """
    efficient_capsnet.check_stem_fits(dataset, preset, input_shape)
    x = input_scaling_layer(preset, input_shape, input_statistics)(images)
    for index, block in enumerate(preset["stem"], start=1):
        for layer in efficient_capsnet.stem_block(
                preset["stem_block"], index, **block,
                normalization=normalization):
            x = layer(x)
    return x  # (batch, height, width, channels)


def primary_capsules(features, preset, input_shape):
    """Efficient-CapsNet's `PrimaryCaps` on the stem's feature map.

    Returns:
        The capsules `(batch, num_capsules, capsule_dim)`.
    """
    arguments = efficient_capsnet.primary_caps_arguments(
        preset, input_shape, tuple(features.shape[1:]))
    return layers.PrimaryCaps(**arguments, name="primary_caps")(features)


def decoder(preset, input_shape, input_dim):
    """Efficient-CapsNet's reconstruction decoder for the preset."""
    return efficient_capsnet.preset_decoder(preset, input_shape, input_dim)

