import functools

import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_classifier import efficient_capsnet_stem
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier.position_window import (
    position_features,
)
from keras_caps.applications.capsule_head import capsule_head_model
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    STEM_NORMALIZATIONS,
)
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.model_family import ModelFamily
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

# Puts the trainable parameters on MNIST without the decoder (161,863)
# next to the capsule models' (161,664 to 161,952); see the docstring.
VECTOR_CNN_HIDDEN_UNITS = 71


@keras_caps_export("keras_caps.applications.VectorCNN")
@builder_docstring
def VectorCNN(dataset="mnist", *, hidden_units=VECTOR_CNN_HIDDEN_UNITS,
              input_shape=None, num_classes=None, reconstruction=True,
              input_statistics=None, compile=True, optimizer="auto",
              jit_compile="auto", name=None, stem_normalization="batch"):
    """Steps 2 and 3 of the CNN ladder: squashed class vectors, margin loss.

    The head of `PositionCNN` (the stem, the primary capsules' window over
    the whole map, a ReLU dense layer) ending in one 16-D vector per class
    instead of a logit: the vectors are squashed (Efficient-CapsNet's
    squash, as `CapsuleClassifier` squashes the routers' unsquashed
    outputs), their lengths are the class scores and the margin loss
    (Sabour et al., 2017, Eq. 4) trains them, as the capsule models'
    class capsules, but no capsule votes or routing produce them. Gu,
    Tresp & Hu (2021, Section 3) find that these components, not
    routing, carry capsule networks' robustness. With
    `reconstruction=True` (step 3) the capsule models' decoder
    reconstructs the image from the true class's vector (the longest one
    at inference) and its weighted squared error joins the loss; with
    `reconstruction=False` (step 2) there is no decoder:

    ```
    x        = window(stem(image / 255))           # (batch, 128)
    x        = Dense(hidden_units, relu)(x)        # (batch, 71)
    vectors  = reshape(Dense(classes * 16)(x))     # (batch, classes, 16)
    vectors  = squash(vectors)
    scores   = Length(vectors)                     # (batch, classes)
    ```

    Trainable parameters on MNIST: the stem 130,688 and the window 10,496
    (as `PositionCNN`); the head 128 * 71 + 71 + 71 * 160 + 160 = 20,679;
    in all 161,863 without the decoder (the capsule models: 161,664 to
    161,952). The decoder of the capsule models adds 160 * 512 + 512 +
    512 * 1024 + 1024 + 1024 * 784 + 784 = 1,411,344: 1,573,207 with it.
    On `"multi_mnist"`: the window 5 * 5 * 128 + 128 = 3,328, so 154,695
    without the decoder; the decoder's last layer draws 36 * 36 pixels
    (1024 * 1296 + 1296), 1,936,144 in all: 2,090,839 with it. The two
    longest vectors are the digits read, and the decoder reconstructs
    each digit from the vector of its own class, as the capsule models'.

    Args:
        dataset: str. A preset of `CapsuleClassifier`: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"`, `"mnist_canvas"` or
            `"multi_mnist"`.
        hidden_units: int. Width of the hidden dense layer. Defaults to 71.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's; for other shapes the window covers the whole map.
        num_classes: int. Defaults to the preset's.
        reconstruction: bool. Add the decoder and its loss (step 3).
            Defaults to `True`.
        input_statistics: `(mean, variance)` per channel, for presets that
            standardise their input (smallNORB).
        compile: bool. Compile with Adam, the margin loss and metrics.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name. Defaults to `"cnn_vectors"`, or
            `"cnn_vectors_decoder"` with `reconstruction=True`.
        stem_normalization: str. `"batch"` (default) or `"group"`
            (GroupNormalization, 8 channels per group: Wu & He, 2018), as
            in `CapsuleClassifier`; the same trainable parameters.

    Returns:
        A `keras.Model`, mapping images to class scores (or, with
        `reconstruction=True`, `{"image", "label"}` to `{"length",
        "reconstruction"}`, as `CapsuleClassifier`).

    Example:

    >>> model = keras_caps.applications.VectorCNN(
    ...     "mnist", reconstruction=False, compile=False)
    >>> model.output_shape
    (None, 10)
    >>> model.count_params() - 576  # minus the BatchNorm statistics
    161863

    Reference:
    - [Gu, Tresp & Hu, 2021](https://arxiv.org/abs/2103.15459)
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """
    check_bool("reconstruction", reconstruction)
    check_choice("stem_normalization", stem_normalization,
                 STEM_NORMALIZATIONS)
    preset = VECTOR_CNN.get_preset(dataset)
    hidden_units = check_positive_int("hidden_units", hidden_units)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)
    capsule_dim = preset["capsule_dim"]

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = position_features(images, dataset, preset, input_shape,
                          input_statistics, stem_normalization)  # (batch, 128)
    x = keras.layers.Dense(hidden_units, activation="relu",
                           name="hidden")(x)  # (batch, hidden_units)
    x = keras.layers.Dense(num_classes * capsule_dim,
                           name="class_vectors")(x)  # (batch, classes * 16)
    x = keras.layers.Reshape((num_classes, capsule_dim),
                             name="class_vector_shape")(x)
    class_vectors = layers.Squash(name=roles.CLASS_CAPSULES)(
        x)  # (batch, classes, 16)
    decoder = None
    if reconstruction:
        decoder = efficient_capsnet_stem.decoder(
            preset, input_shape, num_classes * capsule_dim)
    default_name = "cnn_vectors_decoder" if reconstruction else "cnn_vectors"
    return capsule_head_model(
        images, class_vectors, decoder, preset, name or default_name,
        compile=compile, optimizer=optimizer, jit_compile=jit_compile)


# The CNN ladder's step 2 (no decoder) and step 3 (the decoder and its
# reconstruction loss): two models, one name each (`cnn_vectors`,
# `cnn_vectors_decoder`).
VECTOR_CNN = ModelFamily(
    name="VectorCNN", builder=functools.partial(VectorCNN,
                                                reconstruction=False),
    presets=CAPSULE_CLASSIFIER_PRESETS, has_decoder=False)
VECTOR_CNN_DECODER = ModelFamily(
    name="VectorCNN(reconstruction=True)", builder=VectorCNN,
    presets=CAPSULE_CLASSIFIER_PRESETS, requires_decoder=True)
