import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications import decoders
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsnet.capsnet_presets import CAPSNET_PRESETS
from keras_caps.applications.capsule_head import capsule_head_model
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.official_weights import check_weights_arguments
from keras_caps.applications.official_weights import load_official_weights
from keras_caps.validation import check_positive_int


@keras_caps_export("keras_caps.applications.CapsNet")
@builder_docstring
def CapsNet(dataset="mnist", *, input_shape=None, num_classes=None,
            num_iterations=None, reconstruction=True, compile=True,
            optimizer="auto", jit_compile="auto", weights=None,
            name="capsnet"):
    """Builds the original CapsNet, compiled and ready for `model.fit`.

    The architecture of Sabour et al. (2017) for `dataset`: a 9x9
    convolution with 256 ReLU channels, primary capsules (a 9x9, stride 2
    convolution grouped into 32 types of 8-D capsules, squashed;
    `ConvPrimaryCaps`), `DynamicRouting` by agreement (3 iterations) to one
    16-D capsule per class, capsule lengths as class scores, and a decoder
    (Dense 512 -> 1024 -> pixels) that reconstructs the input from the
    masked class capsule(s). The model takes raw pixels (0-255) and scales
    them itself, so an exported model serves raw images.

    Parameters match the official code (`research/capsules/` in
    github.com/Sarasra/models): the primary capsules are scaled by 1/32 and
    ordered `(type, h, w)`, and the class capsules have the official
    per-output bias. Trainable parameters on MNIST: 6,804,384 without the
    decoder, 8,215,728 with it (the paper's 6.8M and 8.2M); on MultiMNIST
    9,425,824 and 11,361,968. The decoder uses the package's
    `dense_decoder` initialisers, not the official ones.

    With `reconstruction=True` the model maps
    `{"image": images, "label": one_hot}` to
    `{"length": class_scores, "reconstruction": images_in_0_1}` and is
    compiled with the margin loss (summed over classes) plus the weighted
    reconstruction MSE (0.0005 x the sum of squared errors, see
    `capsnet_presets.py`); the decoder is fed the true class capsule while
    training and the longest capsule otherwise. For MultiMNIST, `label`
    holds the two ordered one-hot labels `(batch, 2, num_classes)` and the
    reconstruction has one image per digit. With `reconstruction=False` the
    model maps images to class scores.
    `keras_caps.applications.inference_model(model)` returns the
    image-to-scores model that gets exported.

    Args:
        dataset: str. One of `"mnist"`, `"fashion_mnist"`, `"multi_mnist"`:
            the preset architecture and training settings.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's. Images must be at least 17 x 17.
        num_classes: int. Defaults to the preset's.
        num_iterations: int. Routing iterations. Defaults to the preset's
            (3).
        reconstruction: bool. Add the decoder and its loss. Defaults to
            `True`.
        compile: bool. Compile with Adam, the margin loss and metrics.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate, 1e-3)
            or a Keras optimizer.
        jit_compile: {jit_compile}
        weights: str or `None`. Path of the official Keras 2 HDF5 weights
            of the original CapsNet (`bin/original_capsnet_MNIST.h5` of
            github.com/EscVM/Efficient-CapsNet) to load, see
            `keras_caps.applications.load_official_weights`. Needs the
            preset's `input_shape` and `num_classes`. Defaults to `None`
            (random weights).
        name: str. Model name.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = keras_caps.applications.CapsNet(
    ...     "mnist", reconstruction=False, compile=False)
    >>> model.output_shape
    (None, 10)

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """
    preset = get_preset(dataset)
    check_weights_arguments("CapsNet", weights, preset, input_shape,
                            num_classes)
    input_shape = _check_input_shape(input_shape, preset)
    num_classes = resolve_num_classes(num_classes, preset)
    num_iterations = (preset["num_iterations"] if num_iterations is None
                      else check_positive_int("num_iterations",
                                              num_iterations))
    num_objects = preset["num_objects"]
    if num_objects > num_classes:
        raise ValueError(
            f"The {dataset!r} preset recognises {num_objects} objects per "
            f"image, which needs at least {num_objects} classes. Received: "
            f"num_classes={num_classes}")

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = keras.layers.Rescaling(1.0 / 255.0, name=roles.INPUT_SCALING)(images)
    # Official initialisers: truncated normal (std 5e-2 for conv1, the
    # default 0.1 of `weight_variable` for the capsule layers), biases 0.1.
    x = keras.layers.Conv2D(
        **preset["conv"], activation="relu",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.05),
        bias_initializer=keras.initializers.Constant(0.1),
        name="conv_1")(x)
    capsules = layers.ConvPrimaryCaps(
        **preset["primary_caps"],
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.1),
        bias_initializer=keras.initializers.Constant(0.1),
        name="primary_caps")(x)
    class_capsules = layers.DynamicRouting(
        num_classes, preset["capsule_dim"], num_iterations=num_iterations,
        use_bias=True, name=roles.CLASS_CAPSULES)(capsules)
    decoder = None
    if reconstruction:
        decoder = decoders.dense_decoder(
            num_classes * preset["capsule_dim"], input_shape,
            num_objects=num_objects)
    model = capsule_head_model(images, class_capsules, decoder, preset, name,
                               compile=compile, optimizer=optimizer,
                               jit_compile=jit_compile)
    if weights is not None:
        load_official_weights(model, weights)
    return model


def get_preset(dataset):
    """The preset dict of `dataset`, with a clear error for unknown names."""
    return CAPSNET.get_preset(dataset)


def learning_rate_schedule(dataset):
    """The preset's per-epoch schedule `max(lr0 * decay**epoch, min_lr)`.

    The official decay, 0.96 every 2,000 steps of 128 images, expressed
    per epoch of MNIST (468 steps).
    """
    return CAPSNET.learning_rate_schedule(dataset)


def dataset_options(dataset):
    """The loader options of the preset's recipe, e.g. its augmentation."""
    return CAPSNET.dataset_options(dataset)


def _minimum_size(preset):
    conv, primary = preset["conv"], preset["primary_caps"]
    return conv["kernel_size"] + primary["kernel_size"] - 1


def _check_input_shape(input_shape, preset):
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    smallest = _minimum_size(preset)
    if min(input_shape[:2]) < smallest:
        raise ValueError(
            f"`input_shape` {tuple(input_shape)} is too small for CapsNet, "
            "whose two valid 9x9 convolutions need images of at least "
            f"{smallest}x{smallest}. Received: "
            f"input_shape={tuple(input_shape)}")
    return tuple(input_shape)


CAPSNET = ModelFamily(name="CapsNet", builder=CapsNet, presets=CAPSNET_PRESETS)
