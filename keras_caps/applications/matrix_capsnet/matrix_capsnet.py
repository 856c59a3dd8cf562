import keras

from keras_caps import callbacks
from keras_caps import layers
from keras_caps import losses
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.compiling import compile_model
from keras_caps.applications.compiling import resolve_optimizer
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.matrix_capsnet.matrix_capsnet_presets import (
    MATRIX_CAPSNET_PRESETS,
)
from keras_caps.applications.model_family import ModelFamily
from keras_caps.validation import check_positive_int


@keras_caps_export("keras_caps.applications.MatrixCapsNet")
@builder_docstring
def MatrixCapsNet(dataset="smallnorb", *, input_shape=None, num_classes=None,
                  num_iterations=None, reconstruction=False, compile=True,
                  optimizer="auto", jit_compile="auto",
                  name="matrix_capsnet"):
    """Builds matrix capsules with EM routing, compiled for `model.fit`.

    The smallNORB model of Hinton, Sabour & Frosst (ICLR 2018, §5, Figure
    1), with the grid sizes of `"valid"` windows:

    ```
    x      = per-image standardisation(image)          # (b, 32, 32, 1)
    x      = ReLU(Conv2D 5x5, A = 32, stride 2)(x)     # (b, 14, 14, 32)
    caps   = PrimaryMatrixCaps(B = 32)(x)              # (b, 14, 14, 32, 17)
    caps   = ConvMatrixCaps(C = 32, K = 3, stride 2)   # (b, 6, 6, 32, 17)
    caps   = ConvMatrixCaps(D = 32, K = 3, stride 1)   # (b, 4, 4, 32, 17)
    class  = EMRouting(classes, coordinate addition)   # (b, classes, 16)
    scores = Length(class)                             # (b, classes)
    ```

    The `"mnist"` preset is the paper's small capsule network (§5: A = 64,
    B = 8, C = D = 16) on 28 x 28 digits, grids 12 x 12 -> 5 x 5 -> 3 x 3,
    about 6x less routing work per image (see `matrix_capsnet_presets`).
    Every capsule layer routes with 3 EM iterations (Procedure 1; 2 in
    the MNIST preset) and a
    linear inverse-temperature ramp: to 0.01 on smallNORB (the paper gives
    none; with the layers' default ramp to 1, every activation starts
    saturated at 1 and the spread loss has no gradient); the MNIST preset
    routes with 2 iterations, measured in
    `matrix_capsnet_presets`. The class capsule layer
    returns, per class, the direction of its mean pose scaled to its EM
    activation `a_j` (`EMRouting(output_kind="vector")`), so the class
    scores, the capsule lengths, are the class activations. The model is
    compiled with the spread loss (`keras_caps.losses.SpreadLoss`, margin
    0.2; the training recipe raises it to 0.9 over the epochs with
    `keras_caps.callbacks.SpreadLossMarginSchedule`), accuracy and Adam.
    It takes raw pixels and standardises each image itself (layer
    `"input_scaling"`), so an exported model serves raw images.

    Trainable parameters, from the layer shapes, for a 1-channel image,
    `n` classes and the preset's `A, B, C, D`:

    ```
    conv             5 * 5 * 1 * A + A
    primary caps     A * B * 17 + B * 17
    ConvCaps1        3 * 3 * B * C * 16 + 2 * C  (beta_u, beta_a)
    ConvCaps2        3 * 3 * C * D * 16 + 2 * D
    class capsules   D * n * 16 + 2 * n
    ```

    smallNORB (A = B = C = D = 32, n = 5): 832 + 17,952 + 147,520 +
    147,520 + 2,570 = 316,394 (the paper's "310K"). MNIST (A = 64, B = 8,
    C = D = 16, n = 10): 1,664 + 8,840 + 18,464 + 36,896 + 2,580 = 68,444
    (the paper's small network has "68K" on smallNORB). Each capsule layer
    also holds its routing temperature, a non-trainable variable.

    Args:
        dataset: str. `"smallnorb"` or `"mnist"`: the preset architecture
            and training settings.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's. The grids shrink with it: at least 17 x 17 (the
            second capsule layer needs a 3 x 3 grid).
        num_classes: int, at least 2. Defaults to the preset's.
        num_iterations: int. EM iterations of every capsule layer.
            Defaults to the preset's (3, the paper's; 2 for MNIST).
        reconstruction: bool. Must be `False`: the model has no decoder
            (the argument exists for the `keras-caps train` recipe).
        compile: bool. Compile with Adam, the spread loss and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.

    Returns:
        A `keras.Model` from images to class activations.

    Example:

    >>> model = keras_caps.applications.MatrixCapsNet(
    ...     "smallnorb", compile=False)
    >>> model.output_shape
    (None, 5)

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    - [Gritzman, 2019](https://arxiv.org/abs/1907.00652)
    """
    preset = get_preset(dataset)
    reject_reconstruction("MatrixCapsNet", reconstruction)
    input_shape = _check_input_shape(input_shape, preset)
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)
    num_iterations = (preset["num_iterations"] if num_iterations is None
                      else check_positive_int("num_iterations",
                                              num_iterations))

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    # Per-image standardisation: (x - mean) / std over each whole image.
    x = keras.layers.LayerNormalization(
        axis=(1, 2, 3), center=False, scale=False, epsilon=1e-6,
        name=roles.INPUT_SCALING)(images)
    x = keras.layers.Conv2D(**preset["conv"], activation="relu",
                            name="conv_1")(x)  # (b, h, w, A)
    capsules = layers.PrimaryMatrixCaps(
        preset["primary_capsules"], name="primary_caps")(x)
    for index, spec in enumerate(preset["conv_capsules"], start=1):
        # (b, h, w, types, 17) -> (b, h', w', types', 17)
        capsules = layers.ConvMatrixCaps(
            **spec, num_iterations=num_iterations,
            inverse_temperatures=preset["inverse_temperature"],
            kernel_initializer=_vote_initializer(preset),
            name=f"conv_caps_{index}")(capsules)
    class_capsules = layers.EMRouting(
        num_classes, num_iterations=num_iterations,
        inverse_temperatures=preset["class_inverse_temperature"],
        kernel_initializer=_vote_initializer(preset),
        input_kind="matrix",
        output_kind="vector", coordinate_addition=True,
        data_scale=preset["class_data_scale"],
        name=roles.CLASS_CAPSULES)(capsules)  # (b, classes, 16)
    scores = layers.Length(dtype="float32", name=roles.LENGTH)(
        class_capsules)  # (b, classes): the class activations
    model = keras.Model(images, scores, name=name)
    if compile:
        optimizer = resolve_optimizer(
            optimizer, lambda: keras.optimizers.Adam(
                learning_rate=preset["learning_rate"]))
        compile_model(model, optimizer,
                      loss=losses.SpreadLoss(preset["initial_margin"]),
                      metrics=["accuracy"], jit_compile=jit_compile)
    return model


def _vote_initializer(preset):
    """The initializer of the 4x4 vote transforms `W_ij`."""
    return keras.initializers.RandomNormal(
        stddev=preset["vote_kernel_stddev"])


def get_preset(dataset):
    """The preset dict of `dataset`, with a clear error for unknown names."""
    return MATRIX_CAPSNET.get_preset(dataset)


def recipe_callbacks(dataset, epochs):
    """The recipe's `[SpreadLossMarginSchedule]`: 0.2 -> 0.9 over `epochs`."""
    preset = get_preset(dataset)
    return [callbacks.SpreadLossMarginSchedule(
        preset["initial_margin"], preset["final_margin"],
        ramp_epochs=epochs)]


def _grid_sizes(input_shape, preset):
    """The (height, width) of each capsule grid for `input_shape`."""
    def shrink(size, kernel, strides):
        return (size - kernel) // strides + 1

    conv = preset["conv"]
    size = tuple(shrink(side, conv["kernel_size"], conv["strides"])
                 for side in input_shape[:2])
    sizes = [size]
    for spec in preset["conv_capsules"]:
        size = tuple(shrink(side, spec["kernel_size"], spec["strides"])
                     for side in size)
        sizes.append(size)
    return sizes


def _check_input_shape(input_shape, preset):
    input_shape = tuple(check_image_shape(input_shape,
                                          preset["input_shape"]))
    if min(min(size) for size in _grid_sizes(input_shape, preset)) < 1:
        raise ValueError(
            "Received an invalid value for `input_shape`: MatrixCapsNet's "
            "valid 5x5 stride-2 convolution and 3x3 capsule windows (stride "
            "2, then 1) need images of at least 17 x 17. Received: "
            f"input_shape={input_shape}")
    return input_shape


MATRIX_CAPSNET = ModelFamily(name="MatrixCapsNet", builder=MatrixCapsNet,
                             presets=MATRIX_CAPSNET_PRESETS,
                             has_decoder=False,
                             recipe_callbacks=recipe_callbacks)
