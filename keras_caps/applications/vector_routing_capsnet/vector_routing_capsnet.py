import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.compiling import compile_logits_classifier
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.image_inputs import input_scaling_layer
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet_presets import (  # noqa: E501
    VECTOR_ROUTING_CAPSNET_PRESETS,
)

_LAYER_NORM_EPSILON = 1e-5


@keras_caps_export("keras_caps.applications.VectorRoutingCapsNet")
@builder_docstring
def VectorRoutingCapsNet(dataset="mnist", *, input_shape=None,
                         num_classes=None, reconstruction=False,
                         input_statistics=None, compile=True,
                         optimizer="auto", jit_compile="auto",
                         name="vector_routing_capsnet"):
    """Builds an image classifier of stacked vector routings, compiled.

    A small convolutional stem (`Conv2D -> BatchNormalization -> ReLU`
    blocks) turns the image into a feature map whose positions are routed
    with Heinsen's algorithm (`keras_caps.layers.VectorRouting`) to hidden
    vectors, then to hidden vectors again, and finally to one logit per
    class, like the classification heads of the paper:

    ```
    x      = stem(image / 255)                       # (batch, h, w, 128)
    x      = LayerNorm(reshape(x, (h * w, 128)))    # positions
    x      = VectorRouting(32, 64, num_inputs=h * w)(x)
    x      = VectorRouting(32, 64, num_inputs=32)(x)
    logits = VectorRouting(num_classes, 1, num_inputs=32)(x)[..., 0]
    ```

    The first routing has per-position weights (a fixed number of inputs),
    so it knows where each feature is. The model takes raw pixels (0-255)
    and scales them itself (layer `"input_scaling"`), so an exported model
    serves raw images; it maps images to logits `(batch, num_classes)` and is
    compiled with the categorical cross-entropy on logits (one-hot labels,
    as `keras_caps.datasets` yields them) and the metric `"accuracy"`.
    `keras_caps.applications.credit_model(model)` adds the credit of every
    stem position for every class.

    Trainable parameters: 201,435 (MNIST, Fashion-MNIST), 197,801
    (smallNORB); plus 576 BatchNormalization statistics.

    Args:
        dataset: str. One of `"mnist"`, `"fashion_mnist"`, `"smallnorb"`:
            the preset architecture and training settings.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's.
        num_classes: int, at least 2. Defaults to the preset's.
        reconstruction: bool. Must be `False`: the model has no decoder.
            The argument exists for the `keras-caps train` recipe, which
            passes it (use `--no-reconstruction`). Defaults to `False`.
        input_statistics: `(mean, variance)` per channel in raw pixel units,
            for presets that standardise their input (smallNORB), usually
            `keras_caps.datasets.smallnorb.training_statistics()`. Defaults
            to `None`: pixels are only divided by 255.
        compile: bool. Compile with Adam, the cross-entropy and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate, 1e-3) or
            a Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = keras_caps.applications.VectorRoutingCapsNet("mnist")
    >>> model.output_shape
    (None, 10)

    Reference:
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754)
    """
    preset = get_preset(dataset)
    reject_reconstruction("VectorRoutingCapsNet", reconstruction)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = input_scaling_layer(preset, input_shape, input_statistics)(images)
    for index, block in enumerate(preset["stem"], start=1):
        x = keras.layers.Conv2D(
            block["filters"], block["kernel_size"], block["strides"],
            padding="same", use_bias=False, kernel_initializer="he_normal",
            name=f"conv_{index}")(x)
        x = keras.layers.BatchNormalization(name=f"batch_norm_{index}")(x)
        x = keras.layers.ReLU(name=f"relu_{index}")(x)
    height, width, channels = x.shape[1:]
    x = keras.layers.Reshape((height * width, channels),
                             name="positions")(x)
    x = keras.layers.LayerNormalization(epsilon=_LAYER_NORM_EPSILON,
                                        name="feature_norm")(x)
    num_inputs = height * width
    for index, routing in enumerate(preset["hidden_routings"], start=1):
        x, _ = layers.VectorRouting(
            routing["num_capsules"], routing["capsule_dim"],
            num_inputs=num_inputs, num_iterations=preset["num_iterations"],
            name=f"routing_{index}")(x, return_credit=True)
        num_inputs = routing["num_capsules"]
    x, _ = layers.VectorRouting(
        num_classes, 1, num_inputs=num_inputs,
        num_iterations=preset["num_iterations"], dtype="float32",
        name=roles.CLASS_ROUTING)(x, return_credit=True)
    logits = keras.layers.Reshape((num_classes,), dtype="float32",
                                  name=roles.LOGITS)(x)
    model = keras.Model(images, logits, name=name)

    if compile:
        compile_logits_classifier(
            model, optimizer, lambda: keras.optimizers.Adam(
                learning_rate=preset["learning_rate"]), jit_compile)
    return model


def get_preset(dataset):
    """The preset dict of `dataset`, with a clear error for unknown names."""
    return VECTOR_ROUTING_CAPSNET.get_preset(dataset)


def learning_rate_schedule(dataset):
    """The preset's per-epoch schedule `max(lr0 * decay**epoch, min_lr)`."""
    return VECTOR_ROUTING_CAPSNET.learning_rate_schedule(dataset)


VECTOR_ROUTING_CAPSNET = ModelFamily(
    name="VectorRoutingCapsNet", builder=VectorRoutingCapsNet,
    presets=VECTOR_ROUTING_CAPSNET_PRESETS, has_decoder=False)
