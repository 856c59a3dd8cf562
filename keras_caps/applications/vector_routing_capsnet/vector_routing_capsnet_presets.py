"""Per-dataset settings of `VectorRoutingCapsNet` (Heinsen, 2022).

Architecture variants are data. Each `stem` entry is one convolution block,
Conv2D (`filters`, `kernel_size`, `strides`, "same" padding, no bias,
he_normal) -> BatchNormalization -> ReLU; the last feature map's positions
(row by row) are the inputs of the first routing, which has one set of
per-position weights (`num_inputs` fixed). `hidden_routings` lists the
routings to hidden vectors (`num_capsules`, `capsule_dim`); a last routing
gives one logit per class. The shape mirrors the heads of Heinsen (2022):
positions -> hidden vectors -> hidden vectors -> logits, scaled down.

`input_scaling` is `"rescale"` (pixels / 255 inside the model) or
`"standardize"` (per-channel statistics of the training images, stored in the
model). Training: Adam at `learning_rate`, multiplied by
`learning_rate_decay` every epoch down to `min_learning_rate`, categorical
cross-entropy on the logits. These settings are ours (the paper trains
heads on frozen backbones, not small image classifiers).
"""

_TRAINING = {
    "learning_rate_schedule": "exponential_decay",
    "batch_size": 32,
    "epochs": 30,
    "learning_rate": 1e-3,
    "learning_rate_decay": 0.9,
    "min_learning_rate": 1e-5,
    "num_iterations": 2,
}

_HIDDEN_ROUTINGS = [
    {"num_capsules": 32, "capsule_dim": 64},
    {"num_capsules": 32, "capsule_dim": 64},
]

VECTOR_ROUTING_CAPSNET_PRESETS = {
    "mnist": {
        "input_shape": (28, 28, 1),
        "num_classes": 10,
        "input_scaling": "rescale",
        # 28x28 -> 28 -> 14 -> 14 -> 7: 49 positions of 128 features.
        "stem": [
            {"filters": 32, "kernel_size": 3, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 2},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 128, "kernel_size": 3, "strides": 2},
        ],
        "hidden_routings": _HIDDEN_ROUTINGS,
        **_TRAINING,
    },
    "smallnorb": {
        "input_shape": (48, 48, 2),
        "num_classes": 5,
        "input_scaling": "standardize",
        # 48x48 -> 24 -> 24 -> 12 -> 6: 36 positions of 128 features.
        "stem": [
            {"filters": 32, "kernel_size": 5, "strides": 2},
            {"filters": 64, "kernel_size": 3, "strides": 1},
            {"filters": 64, "kernel_size": 3, "strides": 2},
            {"filters": 128, "kernel_size": 3, "strides": 2},
        ],
        "hidden_routings": _HIDDEN_ROUTINGS,
        **_TRAINING,
    },
}

# Fashion-MNIST has MNIST's format; the architecture is the same.
VECTOR_ROUTING_CAPSNET_PRESETS["fashion_mnist"] = (
    VECTOR_ROUTING_CAPSNET_PRESETS["mnist"])
