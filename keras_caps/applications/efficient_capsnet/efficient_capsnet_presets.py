"""Per-dataset settings of Efficient-CapsNet (Mazzia et al., 2021).

The settings are those of the official code,
github.com/EscVM/Efficient-CapsNet: the graphs in
`models/efficient_capsnet_graph_{mnist,smallnorb,multimnist}.py`, the
training settings in `config.json` and `utils/tools.py`.

Architecture variants are data. Each stem entry is one convolution block:
`filters`, `kernel_size`, `strides`. `stem_block` names the block pattern:

- `"conv_relu_batch_norm"`: Conv2D (ReLU, he_normal) -> BatchNormalization,
  the activation before the normalisation as in the official code.
- `"conv_leaky_relu_instance_norm"`: Conv2D (linear, he_normal) -> LeakyReLU
  (slope 0.3) -> instance normalisation (GroupNormalization with one group
  per channel, beta and gamma initialised U(-0.05, 0.05), epsilon 1e-3, as
  the official tensorflow-addons `InstanceNormalization`).

`input_scaling` is `"rescale"` (pixels / 255 inside the model) or
`"standardize"` (per-channel statistics of the training images, stored in the
model). `reconstruction_weight` multiplies the mean squared error of the
decoder; for MultiMNIST the official 0.196 per reconstruction over two
reconstructions equals 0.392 on their mean.
"""

_TRAINING = {
    "learning_rate_schedule": "exponential_decay",
    "batch_size": 16,
    "epochs": 150,
    "learning_rate": 5e-4,
    "learning_rate_decay": 0.97,
    "min_learning_rate": 5e-5,
}

EFFICIENT_CAPSNET_PRESETS = {
    "mnist": {
        "input_shape": (28, 28, 1),
        "num_classes": 10,
        "num_objects": 1,
        "input_scaling": "rescale",
        "stem_block": "conv_relu_batch_norm",
        "stem": [
            {"filters": 32, "kernel_size": 5, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 128, "kernel_size": 3, "strides": 2},
        ],
        "primary_caps": {"num_capsules": 16, "capsule_dim": 8,
                         "kernel_size": 9, "strides": 1},
        "capsule_dim": 16,
        "decoder": "dense",
        "reconstruction_weight": 0.392,
        **_TRAINING,
    },
    "smallnorb": {
        "input_shape": (48, 48, 2),
        "num_classes": 5,
        "num_objects": 1,
        "input_scaling": "standardize",
        "stem_block": "conv_leaky_relu_instance_norm",
        "stem": [
            {"filters": 32, "kernel_size": 7, "strides": 2},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 128, "kernel_size": 3, "strides": 2},
        ],
        "primary_caps": {"num_capsules": 16, "capsule_dim": 8,
                         "kernel_size": 8, "strides": 1},
        "capsule_dim": 16,
        "decoder": "conv",
        "reconstruction_weight": 0.392,
        **_TRAINING,
    },
    "multi_mnist": {
        "input_shape": (36, 36, 1),
        "num_classes": 10,
        "num_objects": 2,
        "input_scaling": "rescale",
        "stem_block": "conv_relu_batch_norm",
        "stem": [
            {"filters": 32, "kernel_size": 5, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 2},
            {"filters": 128, "kernel_size": 3, "strides": 2},
        ],
        "primary_caps": {"num_capsules": 16, "capsule_dim": 8,
                         "kernel_size": 5, "strides": 2},
        "capsule_dim": 16,
        "decoder": "dense",
        "reconstruction_weight": 0.392,
        **_TRAINING,
    },
}

# Fashion-MNIST has MNIST's format; the architecture is the same.
EFFICIENT_CAPSNET_PRESETS["fashion_mnist"] = EFFICIENT_CAPSNET_PRESETS["mnist"]
