import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications import decoders
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_head import capsule_head_model
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.efficient_capsnet.efficient_capsnet_presets import (  # noqa: E501
    EFFICIENT_CAPSNET_PRESETS,
)
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.image_inputs import input_scaling_layer
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.official_weights import check_weights_arguments
from keras_caps.applications.official_weights import load_official_weights


@keras_caps_export("keras_caps.applications.EfficientCapsNet")
@builder_docstring
def EfficientCapsNet(dataset="mnist", *, input_shape=None, num_classes=None,
                     reconstruction=True, input_statistics=None,
                     compile=True, optimizer="auto", jit_compile="auto",
                     weights=None, name="efficient_capsnet"):
    """Builds Efficient-CapsNet, compiled and ready for `model.fit`.

    The official architecture of Mazzia et al. (2021) for `dataset`: a
    convolutional stem, `PrimaryCaps`, `FCCaps` self-attention routing to
    one capsule per class, capsule lengths as class scores, and a decoder
    that reconstructs the input from the masked class capsule(s). The model
    takes raw pixels (0-255) and scales them itself, so an exported model
    serves raw images.

    Trainable parameters of the capsule network without the decoder:
    161,824 (MNIST), 151,664 (smallNORB), 154,656 (MultiMNIST).

    With `reconstruction=True` the model maps
    `{"image": images, "label": one_hot}` to
    `{"length": class_scores, "reconstruction": images_in_0_1}` and is
    compiled with the margin loss plus the weighted reconstruction MSE; the
    decoder is fed the true class capsule while training and the longest
    capsule otherwise. For MultiMNIST, `label` holds the two ordered one-hot
    labels `(batch, 2, num_classes)` and the reconstruction has one image
    per digit. With `reconstruction=False` the model maps images to class
    scores. `keras_caps.applications.inference_model(model)` returns the
    image-to-scores model that gets exported.

    Args:
        dataset: str. One of `"mnist"`, `"fashion_mnist"`, `"smallnorb"`,
            `"multi_mnist"`: the preset architecture and training settings.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's. For other shapes the primary-capsule window covers the
            whole last feature map.
        num_classes: int. Defaults to the preset's.
        reconstruction: bool. Add the decoder and its loss. Defaults to
            `True`.
        input_statistics: `(mean, variance)` per channel in raw pixel units,
            for presets that standardise their input (smallNORB), usually
            `keras_caps.datasets.smallnorb.training_statistics()`. Defaults
            to `None`: pixels are only divided by 255.
        compile: bool. Compile with Adam, the margin loss and metrics.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate, 5e-4) or
            a Keras optimizer.
        jit_compile: {jit_compile}
        weights: str or `None`. Path of an official Efficient-CapsNet
            Keras 2 HDF5 weights file for this dataset
            (`bin/efficient_capsnet_{MNIST,SMALLNORB,MULTIMNIST}.h5` of
            github.com/EscVM/Efficient-CapsNet) to load, see
            `keras_caps.applications.load_official_weights`. Needs the
            preset's `input_shape` and `num_classes`, and for smallNORB
            `input_statistics`: the training statistics to feed raw pixels,
            or `((0, 0), (1, 1))` to feed images standardised as the
            official code does. Defaults to `None` (random weights).
        name: str. Model name.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet(
    ...     "mnist", reconstruction=False)
    >>> model.output_shape
    (None, 10)

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """
    preset = get_preset(dataset)
    check_weights_arguments("EfficientCapsNet", weights, preset, input_shape,
                            num_classes, input_statistics)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    check_stem_fits(dataset, preset, input_shape)
    num_classes = resolve_num_classes(num_classes, preset)
    num_objects = preset["num_objects"]
    if num_objects > num_classes:
        raise ValueError(
            f"The {dataset!r} preset recognises {num_objects} objects per "
            f"image, which needs at least {num_objects} classes. Received: "
            f"num_classes={num_classes}")

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = input_scaling_layer(preset, input_shape, input_statistics)(images)
    for index, block in enumerate(preset["stem"], start=1):
        for layer in stem_block(preset["stem_block"], index, **block):
            x = layer(x)
    primary_caps_args = primary_caps_arguments(preset, input_shape,
                                                tuple(x.shape[1:]))
    capsules = layers.PrimaryCaps(**primary_caps_args,
                                  name="primary_caps")(x)
    class_capsules = layers.FCCaps(num_classes, preset["capsule_dim"],
                                   name=roles.CLASS_CAPSULES)(capsules)
    decoder = None
    if reconstruction:
        decoder = preset_decoder(preset, input_shape,
                           num_classes * preset["capsule_dim"])
    model = capsule_head_model(images, class_capsules, decoder, preset, name,
                               compile=compile, optimizer=optimizer,
                               jit_compile=jit_compile)
    if weights is not None:
        load_official_weights(model, weights)
    return model


def get_preset(dataset):
    """The preset dict of `dataset`, with a clear error for unknown names."""
    return EFFICIENT_CAPSNET.get_preset(dataset)


def learning_rate_schedule(dataset):
    """The preset's per-epoch schedule `max(lr0 * decay**epoch, min_lr)`."""
    return EFFICIENT_CAPSNET.learning_rate_schedule(dataset)


def _stem_output_size(size, stem):
    for block in stem:
        size = (size - block["kernel_size"]) // block["strides"] + 1
        if size < 1:
            return 0
    return size


# Efficient-CapsNet's building blocks below are shared with the other
# builders on its stem (`capsule_classifier.efficient_capsnet_stem`).


def check_stem_fits(dataset, preset, input_shape):
    """Raises a `ValueError` when images of `input_shape` are too small for
    the valid convolutions of the preset's stem."""
    if min(_stem_output_size(size, preset["stem"])
           for size in input_shape[:2]) >= 1:
        return
    smallest = next(size for size in range(1, 1000)
                    if _stem_output_size(size, preset["stem"]) >= 1)
    raise ValueError(
        f"`input_shape` {tuple(input_shape)} is too small for the stem of "
        f"the {dataset!r} preset, whose valid convolutions need images of "
        f"at least {smallest}x{smallest}. Received: "
        f"input_shape={tuple(input_shape)}")


STEM_NORMALIZATIONS = ("batch", "group")
# Channels per group of the `"group"` stem normalisation (see `stem_block`).
GROUP_NORM_CHANNELS = 8


def group_count(filters):
    """The groups of a `"group"` stem block of `filters` channels: the
    largest divisor of `filters` up to `filters // 8` (at least 1)."""
    groups = max(1, filters // GROUP_NORM_CHANNELS)
    while filters % groups:
        groups -= 1
    return groups


def stem_block(block, index, filters, kernel_size, strides, *,
               normalization="batch"):
    """The layers of the stem's `index`-th block, of kind `block`
    (`"conv_relu_batch_norm"` or `"conv_leaky_relu_instance_norm"`).

    `normalization="group"` replaces a `"conv_relu_batch_norm"` block's
    BatchNormalization by a GroupNormalization of `filters // 8` groups
    (8 channels per group), which normalises each image by its own
    statistics, so no statistics of the training batches are kept (Wu &
    He, "Group Normalization", ECCV 2018). Wu & He's Table 3 finds
    8 to 16 channels per group as good as their default of 32 groups,
    and both extremes (one channel per group, instance normalisation;
    one group, layer normalisation) worse; with the stems' 32 to 128
    channels, 32 groups would make the first block an instance
    normalisation, so the channels per group are fixed instead (for a
    width that 8 does not divide, the largest divisor below). It has
    the same 2 trainable parameters per channel. The
    `"conv_leaky_relu_instance_norm"` block keeps no batch statistics
    either way and is the same for both values.
    """
    if normalization not in STEM_NORMALIZATIONS:
        raise ValueError(
            "Received an invalid value for `stem_normalization`, expected "
            f"one of {list(STEM_NORMALIZATIONS)}. Received: "
            f"stem_normalization={normalization!r}")
    if block == "conv_relu_batch_norm":
        conv = keras.layers.Conv2D(filters, kernel_size, strides,
                                   activation="relu",
                                   kernel_initializer="he_normal",
                                   name=f"conv_{index}")
        if normalization == "group":
            return [conv, keras.layers.GroupNormalization(
                groups=group_count(filters), epsilon=1e-3,
                name=f"group_norm_{index}")]
        return [
            conv,
            keras.layers.BatchNormalization(name=f"batch_norm_{index}"),
        ]
    # "conv_leaky_relu_instance_norm": the official code uses
    # tensorflow-addons' InstanceNormalization; tensorflow-addons has reached
    # its end of life, and a group normalisation with one group per channel
    # computes the same with the same parameters (2 per channel).
    official_init = keras.initializers.RandomUniform(-0.05, 0.05)
    return [
        keras.layers.Conv2D(filters, kernel_size, strides,
                            kernel_initializer="he_normal",
                            name=f"conv_{index}"),
        keras.layers.LeakyReLU(negative_slope=0.3,
                               name=f"leaky_relu_{index}"),
        keras.layers.GroupNormalization(
            groups=filters, epsilon=1e-3, beta_initializer=official_init,
            gamma_initializer=official_init, name=f"instance_norm_{index}"),
    ]


def primary_caps_arguments(preset, input_shape, feature_shape):
    """The preset's window, or one covering the whole map for other inputs."""
    arguments = dict(preset["primary_caps"])
    height, width, channels = feature_shape
    if tuple(input_shape) == tuple(preset["input_shape"]):
        return arguments
    if channels != arguments["num_capsules"] * arguments["capsule_dim"]:
        raise ValueError(
            f"The stem gives {channels} channels, but the primary capsules "
            f"need {arguments['num_capsules']} x {arguments['capsule_dim']}.")
    arguments.update(kernel_size=(height, width), strides=1)
    return arguments


def preset_decoder(preset, input_shape, input_dim):
    """The preset's reconstruction decoder: `(batch, input_dim)` masked
    class capsules -> images of `input_shape`."""
    if preset["decoder"] == "conv" and tuple(input_shape[:2]) == (48, 48):
        return decoders.conv_decoder(input_dim, input_shape)
    return decoders.dense_decoder(input_dim, input_shape,
                                  num_objects=preset["num_objects"])


EFFICIENT_CAPSNET = ModelFamily(name="EfficientCapsNet",
                                builder=EfficientCapsNet,
                                presets=EFFICIENT_CAPSNET_PRESETS)
