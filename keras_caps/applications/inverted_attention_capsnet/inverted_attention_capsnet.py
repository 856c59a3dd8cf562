import math

import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.compiling import compile_logits_classifier
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet_presets import (  # noqa: E501
    INVERTED_ATTENTION_CAPSNET_PRESETS,
)
from keras_caps.applications.model_family import ModelFamily
from keras_caps.layers.inverted_attention_routing_stack import SCHEDULES
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

BACKBONES = ("resnet", "simple")
_LAYER_NORM_EPSILON = 1e-5
_BATCH_NORM_EPSILON = 1e-5  # PyTorch's BatchNorm2d
_BATCH_NORM_MOMENTUM = 0.9  # PyTorch's momentum 0.1


@keras_caps_export("keras_caps.applications.InvertedAttentionCapsNet")
@builder_docstring
def InvertedAttentionCapsNet(dataset="cifar10", *, backbone="resnet",
                             input_shape=None, num_classes=None,
                             num_iterations=2, schedule="concurrent",
                             reconstruction=False, compile=True,
                             optimizer="auto", jit_compile="auto",
                             name="inverted_attention_capsnet"):
    """Builds the CIFAR capsule network of Tsai et al. (2020), compiled.

    A convolutional backbone turns the image into a `(16, 16, 128)` feature
    map; a 1x1 convolution splits it into 32 primary capsule types with
    `sqrt(d) x sqrt(d)` matrix poses at every position (LayerNormed); the
    capsules are routed by inverted dot-product attention
    (`keras_caps.layers.InvertedAttentionRouting`) through two
    convolutional capsule layers (3x3 stride 2, then 3x3 stride 1), an
    optional fully-connected layer (CIFAR-100) and the class capsules, all
    layers routed together (`InvertedAttentionRoutingStack`, concurrent by
    default); one `Dense(1)`, shared by all class capsules, maps each class
    capsule's pose to its logit:

    ```
    x      = backbone(Normalization(image))          # (batch, 16, 16, 128)
    poses  = LayerNorm(reshape(Conv1x1(x), (16, 16, 32, d)))
    poses  = stack([conv 3x3 s2 -> 7x7, conv 3x3 s1 -> 5x5,
                    (FC 20,) FC num_classes])(poses)  # (batch, classes, d)
    logits = reshape(Dense(1)(poses), (num_classes,))
    ```

    The model takes raw pixels (0-255) and standardises them itself with
    the CIFAR channel statistics of the official code (layer
    `"input_scaling"`), so an exported model serves raw images; it maps
    images to logits `(batch, num_classes)` and is compiled with the
    categorical cross-entropy on logits (one-hot labels, as
    `keras_caps.datasets` yields them), the metric `"accuracy"`, and SGD
    (learning rate 0.1, momentum 0.9, weight decay, see
    `learning_rate_schedule` for the step decay).

    Trainable parameters (ResNet backbone): 1,828,817 (CIFAR-10, d = 16),
    2,799,629 (CIFAR-100, d = 36), as the official models; simple backbone:
    492,177 and 1,462,989. The ResNet backbone adds 3,200 BatchNormalization
    statistics.

    Args:
        dataset: str. `"cifar10"` or `"cifar100"`: the preset architecture
            and training settings.
        backbone: str. `"resnet"` (the paper's CIFAR results) or
            `"simple"` (one convolution + ReLU). Defaults to `"resnet"`.
        input_shape: tuple `(height, width, 3)`. Defaults to the preset's
            `(32, 32, 3)`. The capsule maps shrink with it: the backbone
            halves it, and the convolutional capsule layers need at least
            7 x 7 there.
        num_classes: int, at least 2. Defaults to the preset's.
        num_iterations: int. Routing passes, counting the uniform first
            pass (`1`: no agreement-based routing). Defaults to `2`, the
            paper's CIFAR runs.
        schedule: str. `"concurrent"` (the paper's) or `"sequential"`.
            Defaults to `"concurrent"`.
        reconstruction: bool. Must be `False`: the model has no decoder.
            The argument exists for the `keras-caps train` recipe, which
            passes it (use `--no-reconstruction`). Defaults to `False`.
        compile: bool. Compile with SGD, the cross-entropy and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (the preset's SGD) or a Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = keras_caps.applications.InvertedAttentionCapsNet(
    ...     "cifar10", backbone="simple", compile=False)
    >>> model.output_shape
    (None, 10)

    Reference:
    - [Tsai et al., 2020](https://arxiv.org/abs/2002.04764)
    """
    preset = get_preset(dataset)
    check_choice("backbone", backbone, BACKBONES)
    num_iterations = check_positive_int("num_iterations", num_iterations)
    check_choice("schedule", schedule, SCHEDULES)
    reject_reconstruction("InvertedAttentionCapsNet", reconstruction)
    input_shape = _check_input_shape(input_shape, preset)
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = keras.layers.Normalization(
        mean=[255.0 * mean for mean in preset["input_mean"]],
        variance=[(255.0 * std)**2 for std in preset["input_std"]],
        name=roles.INPUT_SCALING)(images)
    if backbone == "resnet":
        x = _resnet_backbone(x, preset["backbones"]["resnet"])
    else:
        x = _simple_backbone(x, preset["backbones"]["simple"])
    x = _primary_capsules(x, preset["primary_capsules"])
    _check_capsule_map(x.shape, preset["capsules"], input_shape)
    capsule_dim = preset["primary_capsules"]["capsule_dim"]
    class_poses = _capsule_routing(preset["capsules"], num_classes,
                                   capsule_dim, num_iterations,
                                   schedule)(x)
    # class_poses: (batch, num_classes, capsule_dim)
    bound = 1.0 / math.sqrt(capsule_dim)
    x = keras.layers.Dense(
        1, kernel_initializer=_torch_default_initializer(),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
        dtype="float32", name="classifier")(class_poses)
    # Reshape, not squeeze: a batch of one keeps its batch axis.
    logits = keras.layers.Reshape((num_classes,), dtype="float32",
                                  name=roles.LOGITS)(x)
    model = keras.Model(images, logits, name=name)

    if compile:
        compile_logits_classifier(
            model, optimizer, lambda: keras.optimizers.SGD(
                learning_rate=preset["learning_rate"],
                momentum=preset["momentum"],
                weight_decay=preset["weight_decay"]), jit_compile)
    return model


def _primary_capsules(features, primary):
    """The feature map -> LayerNormed primary capsule poses.

    `(batch, height, width, channels)` -> `(batch, height, width,
    num_capsules, capsule_dim)`.
    """
    num_capsules, capsule_dim = (primary["num_capsules"],
                                 primary["capsule_dim"])
    x = keras.layers.Conv2D(
        num_capsules * capsule_dim, 1, use_bias=False,
        kernel_initializer=_torch_default_initializer(),
        name="primary_conv")(features)
    height, width = x.shape[1:3]
    # Channel n * d + a is entry a of capsule type n, as the official
    # `CapsModel.forward` (src/capsule_model.py) reshapes the primary
    # convolution's channels to (num_capsules, capsule_dim).
    x = keras.layers.Reshape((height, width, num_capsules, capsule_dim),
                             name="primary_capsules")(x)
    return keras.layers.LayerNormalization(
        epsilon=_LAYER_NORM_EPSILON, name="primary_norm")(x)


def _capsule_routing(capsule_specs, num_classes, capsule_dim,
                     num_iterations, schedule):
    """The routed capsule layers of the preset, then the class capsules,
    routed together: primary poses -> `(batch, num_classes, capsule_dim)`.
    """
    routed = [
        layers.InvertedAttentionRouting(
            spec["num_capsules"], spec["capsule_dim"],
            kernel_size=spec["kernel_size"], strides=spec["strides"],
            num_iterations=num_iterations, epsilon=_LAYER_NORM_EPSILON,
            name=spec["name"])
        for spec in capsule_specs]
    routed.append(layers.InvertedAttentionRouting(
        num_classes, capsule_dim, num_iterations=num_iterations,
        epsilon=_LAYER_NORM_EPSILON, name="class_caps"))
    return layers.InvertedAttentionRoutingStack(
        routed, num_iterations=num_iterations, schedule=schedule,
        name=roles.CAPSULE_ROUTING)


def get_preset(dataset):
    """The preset dict of `dataset`, with a clear error for unknown names."""
    return INVERTED_ATTENTION_CAPSNET.get_preset(dataset)


def learning_rate_schedule(dataset):
    """The official step decay: `lr0 * decay**(boundaries passed)`.

    0.1 until epoch 150, 0.01 until epoch 250, then 0.001 (PyTorch's
    `MultiStepLR([150, 250], gamma=0.1)`; epochs count from 0).
    """
    return INVERTED_ATTENTION_CAPSNET.learning_rate_schedule(dataset)


def _torch_default_initializer():
    # PyTorch's default for convolution and linear kernels:
    # U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    return keras.initializers.VarianceScaling(
        scale=1.0 / 3.0, mode="fan_in", distribution="uniform")


def _conv(x, filters, kernel_size, strides, name, use_bias=False):
    if strides > 1 and kernel_size > 1:
        # PyTorch's symmetric padding of 1, where Keras' "same" would pad
        # only after for an even input and stride 2.
        x = keras.layers.ZeroPadding2D(kernel_size // 2,
                                       name=f"{name}_padding")(x)
        padding = "valid"
    else:
        padding = "same"
    return keras.layers.Conv2D(
        filters, kernel_size, strides, padding=padding, use_bias=use_bias,
        kernel_initializer=_torch_default_initializer(), name=name)(x)


def _batch_norm(x, name):
    return keras.layers.BatchNormalization(
        momentum=_BATCH_NORM_MOMENTUM, epsilon=_BATCH_NORM_EPSILON,
        name=name)(x)


def _resnet_backbone(x, config):
    x = _conv(x, config["stem_filters"], 3, 1, "stem_conv")
    x = _batch_norm(x, "stem_batch_norm")
    x = keras.layers.ReLU(name="stem_relu")(x)
    index = 0
    for stage in config["stages"]:
        for block in range(stage["num_blocks"]):
            index += 1
            strides = stage["strides"] if block == 0 else 1
            x = _basic_block(x, stage["filters"], strides, f"block_{index}")
    return x


def _basic_block(x, filters, strides, name):
    shortcut = x
    y = _conv(x, filters, 3, strides, f"{name}_conv_1")
    y = _batch_norm(y, f"{name}_batch_norm_1")
    y = keras.layers.ReLU(name=f"{name}_relu_1")(y)
    y = _conv(y, filters, 3, 1, f"{name}_conv_2")
    y = _batch_norm(y, f"{name}_batch_norm_2")
    if strides != 1 or x.shape[-1] != filters:
        shortcut = _conv(x, filters, 1, strides, f"{name}_shortcut_conv")
        shortcut = _batch_norm(shortcut, f"{name}_shortcut_batch_norm")
    y = keras.layers.Add(name=f"{name}_add")([y, shortcut])
    return keras.layers.ReLU(name=f"{name}_relu_2")(y)


def _simple_backbone(x, config):
    x = _conv(x, config["filters"], config["kernel_size"], config["strides"],
              "backbone_conv", use_bias=True)
    return keras.layers.ReLU(name="backbone_relu")(x)


def _check_input_shape(input_shape, preset):
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    if input_shape[-1] != 3:
        raise ValueError(
            "Received an invalid value for `input_shape`: the model "
            "standardises 3 colour channels with the CIFAR statistics. "
            f"Received: input_shape={tuple(input_shape)!r}")
    return tuple(input_shape)


def _check_capsule_map(shape, capsule_specs, input_shape):
    """Raises when the capsule map is too small for the capsule layers."""
    height, width = shape[1:3]
    for spec in capsule_specs:
        if spec["kernel_size"] is None:
            break
        kernel, strides = spec["kernel_size"], spec["strides"]
        if height < kernel or width < kernel:
            raise ValueError(
                "Received an invalid value for `input_shape`: it is too "
                f"small for the capsule layer {spec['name']!r} "
                f"({kernel}x{kernel} windows on a {height}x{width} capsule "
                "map); the preset's 32x32 gives 16x16 -> 7x7 -> 5x5. "
                f"Received: input_shape={input_shape!r}")
        height = (height - kernel) // strides + 1
        width = (width - kernel) // strides + 1


INVERTED_ATTENTION_CAPSNET = ModelFamily(
    name="InvertedAttentionCapsNet", builder=InvertedAttentionCapsNet,
    presets=INVERTED_ATTENTION_CAPSNET_PRESETS, has_decoder=False)
