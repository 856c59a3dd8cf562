import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import reject_reconstruction
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.image_inputs import input_scaling_layer
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.softmax_head import softmax_head_model
from keras_caps.validation import check_number

# Sabour et al. 2017, Section 5: the widths of the three convolutions and
# the two dense layers.
_CONV_FILTERS = (256, 256, 128)
_DENSE_UNITS = (328, 192)

# Sabour et al. trained their baseline on MNIST (28 x 28) and, for the
# affNIST test (Section 5.2), on MNIST digits placed on a 40 x 40 canvas.
SABOUR_BASELINE_CNN_PRESETS = {
    dataset: CAPSULE_CLASSIFIER_PRESETS[dataset]
    for dataset in ("mnist", "mnist_canvas")
}


@keras_caps_export("keras_caps.applications.SabourBaselineCNN")
@builder_docstring
def SabourBaselineCNN(dataset="mnist", *, dropout=0.5, input_shape=None,
                      num_classes=None, reconstruction=False,
                      input_statistics=None, compile=True, optimizer="auto",
                      jit_compile="auto", name="sabour_baseline_cnn"):
    """The baseline CNN of Sabour et al. (2017), for their affNIST protocol.

    Sabour et al. (2017, Section 5) compare CapsNet with "a standard CNN
    with three convolutional layers of 256, 256, 128 channels. Each has
    5x5 kernels and stride of 1", followed by dense layers of 328 and 192
    units and, through dropout, a 10-class softmax with the cross-entropy;
    35.4 M parameters on MNIST. In Section 5.2 both are trained on MNIST
    digits placed on a 40 x 40 canvas until their test accuracy matches
    (99.2 %), then tested on affNIST (CapsNet 79 %, the CNN 66 %). The
    paper names neither the padding, the activations nor the dropout
    rate; `"same"` padding, ReLU and no pooling give its count:

    ```
    x      = image / 255                           # (batch, 28, 28, 1)
    x      = Conv2D(256, 5, same, relu)(x)          # (batch, 28, 28, 256)
    x      = Conv2D(256, 5, same, relu)(x)          # (batch, 28, 28, 256)
    x      = Conv2D(128, 5, same, relu)(x)          # (batch, 28, 28, 128)
    x      = Dense(192, relu)(Dense(328, relu)(flatten(x)))  # (batch, 192)
    probs  = softmax(Dense(num_classes)(dropout(x)))  # (batch, classes)
    ```

    Trainable parameters on MNIST (28 x 28): the convolutions
    5 * 5 * 1 * 256 + 256 = 6,656, 5 * 5 * 256 * 256 + 256 = 1,638,656 and
    5 * 5 * 256 * 128 + 128 = 819,328; the dense layers 28 * 28 * 128 *
    328 + 328 = 32,915,784, 328 * 192 + 192 = 63,168 and 192 * 10 + 10 =
    1,930: 35,445,522 (the paper's 35.4 M). On `"mnist_canvas"` (40 x 40)
    the first dense layer reads 40 * 40 * 128 values: 204,800 * 328 + 328
    = 67,174,728, and 69,704,466 in all.

    It trains under the capsule models' recipe (Adam with the preset's
    learning rate and schedule); Sabour et al. do not give the baseline's.

    Args:
        dataset: str. `"mnist"` or `"mnist_canvas"` (40 x 40, for the
            affNIST protocol).
        dropout: float in [0, 1). The dropout rate before the softmax.
            Defaults to `0.5` (not given in the paper).
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's.
        num_classes: int. Defaults to the preset's (10).
        reconstruction: bool. Must be `False`: the CNN has no decoder. The
            argument exists for the `keras-caps train` recipe.
        input_statistics: Unused by its presets (they divide by 255).
        compile: bool. Compile with Adam, the cross-entropy and accuracy.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name.

    Returns:
        A `keras.Model` mapping images to class probabilities.

    Example:

    >>> model = keras_caps.applications.SabourBaselineCNN(
    ...     "mnist", compile=False)
    >>> model.count_params()
    35445522

    Reference:
    - [Sabour, Frosst & Hinton, 2017](https://arxiv.org/abs/1710.09829)
    """
    reject_reconstruction("SabourBaselineCNN", reconstruction)
    preset = SABOUR_BASELINE_CNN.get_preset(dataset)
    dropout = check_number("dropout", dropout)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(
            "Received an invalid value for `dropout`, expected a rate in "
            f"[0, 1). Received: dropout={dropout!r}")
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = input_scaling_layer(preset, input_shape, input_statistics)(images)
    for index, filters in enumerate(_CONV_FILTERS, start=1):
        x = keras.layers.Conv2D(filters, 5, padding="same",
                                activation="relu",
                                name=f"conv_{index}")(x)  # (b, h, w, f)
    x = keras.layers.Flatten(name="flatten")(x)  # (batch, h * w * 128)
    for index, units in enumerate(_DENSE_UNITS, start=1):
        x = keras.layers.Dense(units, activation="relu",
                               name=f"dense_{index}")(x)
    x = keras.layers.Dropout(dropout, name="dropout")(x)  # (batch, 192)
    return softmax_head_model(images, x, num_classes, preset, name,
                              compile=compile, optimizer=optimizer,
                              jit_compile=jit_compile)


SABOUR_BASELINE_CNN = ModelFamily(name="SabourBaselineCNN",
                                  builder=SabourBaselineCNN,
                                  presets=SABOUR_BASELINE_CNN_PRESETS,
                                  has_decoder=False)
