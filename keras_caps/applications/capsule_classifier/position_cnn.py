import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier.position_window import (
    position_features,
)
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    STEM_NORMALIZATIONS,
)
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.softmax_head import softmax_head_model
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

# Puts the trainable parameters on MNIST (161,766) next to the capsule
# models' (161,664 to 161,952); see the docstring.
POSITION_CNN_HIDDEN_UNITS = 148


@keras_caps_export("keras_caps.applications.PositionCNN")
@builder_docstring
def PositionCNN(dataset="mnist", *, hidden_units=POSITION_CNN_HIDDEN_UNITS,
                input_shape=None, num_classes=None, reconstruction=False,
                input_statistics=None, compile=True, optimizer="auto",
                jit_compile="auto", name="cnn_positions",
                stem_normalization="batch"):
    """Step 1 of the CNN ladder: a CNN that sees the map position by position.

    The ladder takes capsule networks apart one component at a time in the
    manner of Gu, Tresp & Hu (2021, Section 3): step 0 is `CNNBaseline`
    (global average pooling), this step replaces the pooling by the
    primary capsules' window, step 2 (`VectorCNN`) adds the squash and the
    margin loss on class vectors, step 3 (`VectorCNN` with
    `reconstruction=True`) the decoder and its reconstruction loss.

    Here the stem's last feature map is read by the depthwise window of
    Efficient-CapsNet's `PrimaryCaps` (Mazzia et al., 2021), which covers
    the whole map with a weight per position and channel, without the
    capsules' reshape and squash; then a ReLU dense layer and a softmax,
    trained with the categorical cross-entropy under the capsule models'
    recipe:

    ```
    x      = stem(image / 255)                     # (batch, 9, 9, 128)
    x      = window(x)             # depthwise 9x9, valid -> (batch, 128)
    x      = Dense(hidden_units, relu)(x)          # (batch, 148)
    probs  = softmax(Dense(num_classes)(x))        # (batch, classes)
    ```

    Trainable parameters on MNIST: the stem's four convolutions and their
    BatchNorm scales and offsets, 130,688; the window 9 * 9 * 128 + 128 =
    10,496 (as the primary capsules); the head 128 * 148 + 148 + 148 * 10
    + 10 = 20,582; in all 161,766, against 161,664 (`"dynamic"`) to
    161,952 (`"attention"`) for `CapsuleClassifier` without its decoder.
    On `"mnist_canvas"` the window covers the 15 x 15 map: 180,198. On
    `"multi_mnist"` the window is the primary capsules' 5 x 5 of stride 2
    on the 6 x 6 map (5 * 5 * 128 + 128 = 3,328): 154,598; its output is
    a sigmoid per class trained with the binary cross-entropy on the
    two-hot targets (see `CNNBaseline`).

    Args:
        dataset: str. A preset of `CapsuleClassifier`: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"`, `"mnist_canvas"` or
            `"multi_mnist"`.
        hidden_units: int. Width of the hidden dense layer. Defaults to
            148.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's; for other shapes the window covers the whole map.
        num_classes: int. Defaults to the preset's.
        reconstruction: bool. Must be `False`: this step has no decoder.
            The argument exists for the `keras-caps train` recipe.
        input_statistics: `(mean, variance)` per channel, for presets that
            standardise their input (smallNORB).
        compile: bool. Compile with Adam, the cross-entropy and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.
        stem_normalization: str. `"batch"` (default) or `"group"`
            (GroupNormalization, 8 channels per group: Wu & He, 2018), as
            in `CapsuleClassifier`; the same trainable parameters.

    Returns:
        A `keras.Model` mapping images to class probabilities.

    Example:

    >>> model = keras_caps.applications.PositionCNN("mnist", compile=False)
    >>> model.count_params() - 576  # minus the BatchNorm statistics
    161766

    Reference:
    - [Gu, Tresp & Hu, 2021](https://arxiv.org/abs/2103.15459)
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """
    reject_reconstruction("PositionCNN", reconstruction)
    check_choice("stem_normalization", stem_normalization,
                 STEM_NORMALIZATIONS)
    preset = POSITION_CNN.get_preset(dataset)
    hidden_units = check_positive_int("hidden_units", hidden_units)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = position_features(images, dataset, preset, input_shape,
                          input_statistics, stem_normalization)  # (batch, 128)
    x = keras.layers.Dense(hidden_units, activation="relu",
                           name="hidden")(x)  # (batch, hidden_units)
    return softmax_head_model(images, x, num_classes, preset, name,
                              compile=compile, optimizer=optimizer,
                              jit_compile=jit_compile)


POSITION_CNN = ModelFamily(name="PositionCNN", builder=PositionCNN,
                           presets=CAPSULE_CLASSIFIER_PRESETS,
                           has_decoder=False)
