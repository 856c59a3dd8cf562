"""Per-dataset settings of `CapsuleClassifier` and `CNNBaseline`.

Both share Efficient-CapsNet's presets (Mazzia et al., 2021): its stem, its
primary capsules, its capsule size and its training settings (Adam 5e-4,
decayed by 0.97 per epoch, batch 16), so that the routers and the CNN are
compared under one recipe. `"mnist_canvas"` (MNIST digits placed at random
on a 40 x 40 canvas, see `keras_caps.datasets.mnist_canvas`) is the MNIST
preset with a 40 x 40 input; its primary capsules cover the whole 15 x 15
map the stem leaves, as the 9 x 9 window does on 28 x 28 MNIST.

`"multi_mnist"` (two overlapping digits on 36 x 36, Sabour et al. 2017,
Section 6) is Efficient-CapsNet's MultiMNIST preset: its stem (the third
convolution of stride 2) and primary capsules (a 5 x 5 window of stride 2
on the 6 x 6 map); each model reads two digits from its two highest class
scores, the capsule models' decoder reconstructs each digit from the
capsule of its own class.

`cnn_hidden_units` sizes the CNN baseline's hidden dense layer so that its
trainable parameters come close to the capsule models' (161,834 against
Efficient-CapsNet's 161,824 on MNIST; on MultiMNIST 172 units give
154,606 against 154,656: the stem 130,688, then 128 * 172 + 172 and
172 * 10 + 10).
"""

from keras_caps.applications.efficient_capsnet.efficient_capsnet_presets import (  # noqa: E501
    EFFICIENT_CAPSNET_PRESETS,
)

_CNN_HIDDEN_UNITS = 224

CAPSULE_CLASSIFIER_PRESETS = {
    dataset: {**EFFICIENT_CAPSNET_PRESETS[dataset],
              "cnn_hidden_units": _CNN_HIDDEN_UNITS}
    for dataset in ("mnist", "fashion_mnist", "smallnorb")
}
CAPSULE_CLASSIFIER_PRESETS["mnist_canvas"] = {
    **CAPSULE_CLASSIFIER_PRESETS["mnist"],
    "input_shape": (40, 40, 1),
    "primary_caps": {"num_capsules": 16, "capsule_dim": 8,
                     "kernel_size": 15, "strides": 1},
}
CAPSULE_CLASSIFIER_PRESETS["multi_mnist"] = {
    **EFFICIENT_CAPSNET_PRESETS["multi_mnist"],
    "cnn_hidden_units": 172,
}
