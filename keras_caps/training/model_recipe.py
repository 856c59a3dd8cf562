"""The model families `keras-caps train` knows, by command-line name.

A family is data (`keras_caps.applications.ModelFamily`): its builder and
presets hold everything the training recipe needs. To make a new family
trainable from the command line, add it here (see the README, "Adding a
model family").
"""

from keras_caps.applications import CAPSNET
from keras_caps.applications import CAPSULE_CLASSIFIERS
from keras_caps.applications import CNN_BASELINE
from keras_caps.applications import EFFICIENT_CAPSNET
from keras_caps.applications import INVERTED_ATTENTION_CAPSNET
from keras_caps.applications import MATRIX_CAPSNET
from keras_caps.applications import POSITION_CNN
from keras_caps.applications import SABOUR_BASELINE_CNN
from keras_caps.applications import VECTOR_CNN
from keras_caps.applications import VECTOR_ROUTING_CAPSNET

MODELS = {
    "efficient_capsnet": EFFICIENT_CAPSNET,
    "vector_routing_capsnet": VECTOR_ROUTING_CAPSNET,
    "capsnet": CAPSNET,
    "inverted_attention_capsnet": INVERTED_ATTENTION_CAPSNET,
    "matrix_capsnet": MATRIX_CAPSNET,
    # One stem, every router (`keras-caps compare`): one name per router.
    **{f"capsule_classifier_{router}": family
       for router, family in CAPSULE_CLASSIFIERS.items()},
    "cnn_baseline": CNN_BASELINE,
    # The controls of `keras-caps compare`: the CNN ladder's steps 1 (the
    # map seen per position) and 2-3 (squashed class vectors, margin
    # loss; the decoder with --reconstruction), and Sabour et al.'s CNN.
    "cnn_positions": POSITION_CNN,
    "cnn_vectors": VECTOR_CNN,
    "sabour_baseline_cnn": SABOUR_BASELINE_CNN,
}


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
        model: str. A key of `MODELS`.
        input_shape: `(height, width, channels)` of the images.

    Returns:
        str. The preset's dataset name.

    Example:

    >>> closest_preset("efficient_capsnet", (32, 32, 1))
    'mnist'
    """
    height, width, channels = input_shape
    presets = MODELS[model].presets

    def distance(item):
        index, name = item
        preset_height, preset_width, preset_channels = (
            presets[name]["input_shape"])
        return (preset_channels != channels,
                abs(preset_height * preset_width - height * width), index)

    single = [name for name in presets
              if presets[name].get("num_objects", 1) == 1]
    return min(enumerate(single), key=distance)[1]
