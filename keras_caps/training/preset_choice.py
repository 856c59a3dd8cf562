"""Which preset of a model fits a dataset a user brings."""

from keras_caps.applications import MODELS


def closest_preset(model, input_shape):
    """The preset of `model` whose input is closest to `input_shape`.

    For datasets a user brings: the architecture (stem, capsules, decoder)
    and the training recipe come from one of the family's presets, named
    by its dataset. The closest has the same number of channels if any
    preset has, then the nearest image area (height x width); a tie goes
    to the preset listed first. Presets of several objects an image
    (MultiMNIST's two digits) are not candidates: a user's dataset has
    one label an image.

    Args:
        model: str. A key of `keras_caps.applications.MODELS`.
        input_shape: `(height, width, channels)` of the images.

    Returns:
        str. The preset's dataset name.

    Example:

    >>> closest_preset("efficient_capsnet", (32, 32, 1))
    'mnist'
    """
    height, width, channels = input_shape
    presets = MODELS[model].family.presets

    def distance(item):
        index, name = item
        preset_height, preset_width, preset_channels = (
            presets[name]["input_shape"])
        return (preset_channels != channels,
                abs(preset_height * preset_width - height * width), index)

    single = [name for name in presets
              if presets[name].get("num_objects", 1) == 1]
    return min(enumerate(single), key=distance)[1]
