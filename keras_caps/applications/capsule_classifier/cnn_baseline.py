import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_classifier import efficient_capsnet_stem
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
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


@keras_caps_export("keras_caps.applications.CNNBaseline")
@builder_docstring
def CNNBaseline(dataset="mnist", *, hidden_units=None, input_shape=None,
                num_classes=None, reconstruction=False,
                input_statistics=None, compile=True, optimizer="auto",
                jit_compile="auto", name="cnn_baseline",
                stem_normalization="batch"):
    """A plain CNN on Efficient-CapsNet's stem, the capsule models' baseline.

    The stem of `CapsuleClassifier` (Efficient-CapsNet's convolutions for
    `dataset`), then global average pooling, a ReLU dense layer and a
    softmax, trained with the categorical cross-entropy and the same
    optimizer and schedule as the capsule models:

    ```
    x      = stem(image / 255)                     # (batch, h, w, 128)
    x      = Dense(hidden_units, relu)(mean_hw(x))  # (batch, 224)
    probs  = softmax(Dense(num_classes)(x))        # (batch, classes)
    ```

    `hidden_units` (224 by default) puts the trainable parameters close to
    the capsule models': 161,834 on MNIST against Efficient-CapsNet's
    161,824.

    On `"multi_mnist"` (two digits an image) the softmax is a sigmoid per
    class trained with the binary cross-entropy on the two-hot targets,
    and the two highest scores are the digits read; 172 hidden units give
    154,606 trainable parameters (the stem 130,688, then 128 * 172 + 172
    and 172 * 10 + 10) against 154,656 for self_attention.

    Args:
        dataset: str. A preset of `CapsuleClassifier`: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"`, `"mnist_canvas"` or
            `"multi_mnist"`.
        hidden_units: int. Width of the hidden dense layer. Defaults to the
            preset's (224).
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's.
        num_classes: int. Defaults to the preset's.
        reconstruction: bool. Must be `False`: the CNN has no decoder. The
            argument exists for the `keras-caps train` recipe.
        input_statistics: `(mean, variance)` per channel, for presets that
            standardise their input (smallNORB).
        compile: bool. Compile with Adam, the cross-entropy and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.
        stem_normalization: str. `"batch"` (default) or `"group"`
            (GroupNormalization, 8 channels per group, no batch
            statistics: Wu & He, 2018); as in `CapsuleClassifier`. The
            trainable parameters are the same; `"group"` has no 576
            BatchNorm statistics on MNIST.

    Returns:
        A `keras.Model` mapping images to class probabilities (on
        `"multi_mnist"`: a probability per class).

    Example:

    >>> model = keras_caps.applications.CNNBaseline("mnist", compile=False)
    >>> model.count_params() - 576  # minus the BatchNorm statistics
    161834
    """
    reject_reconstruction("CNNBaseline", reconstruction)
    check_choice("stem_normalization", stem_normalization,
                 STEM_NORMALIZATIONS)
    preset = CNN_BASELINE.get_preset(dataset)
    hidden_units = check_positive_int(
        "hidden_units", preset["cnn_hidden_units"] if hidden_units is None
        else hidden_units)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = efficient_capsnet_stem.efficient_capsnet_stem(
        images, dataset, preset, input_shape, input_statistics,
        normalization=stem_normalization)
    x = keras.layers.GlobalAveragePooling2D(name="pooling")(x)  # (b, c)
    x = keras.layers.Dense(hidden_units, activation="relu",
                           name="hidden")(x)  # (batch, hidden_units)
    return softmax_head_model(images, x, num_classes, preset, name,
                              compile=compile, optimizer=optimizer,
                              jit_compile=jit_compile)


CNN_BASELINE = ModelFamily(name="CNNBaseline", builder=CNNBaseline,
                           presets=CAPSULE_CLASSIFIER_PRESETS,
                           has_decoder=False)
