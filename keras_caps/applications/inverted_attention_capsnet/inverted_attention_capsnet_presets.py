"""Per-dataset settings of `InvertedAttentionCapsNet` (Tsai et al., 2020).

Architecture variants are data, from the official configs
`configs/resnet_backbone_CIFAR{10,100}.json` of
github.com/apple/ml-capsules-inverted-attention-routing:

- `backbones`: the feature extractor before the capsules, both ending in a
  `(16, 16, 128)` map for 32 x 32 images. `"resnet"`: a 3x3 convolution of
  64 filters (+ BatchNorm + ReLU), then `stages` of BasicBlocks
  (`filters`, `num_blocks`, `strides` of the first block), as the official
  `resnet_backbone`; `"simple"`: one convolution + ReLU (`simple_backbone`;
  the paper's simple-backbone CIFAR configuration is not public, so its
  filters, kernel and stride here are chosen to give the same map).
- `primary_capsules`: a 1x1 convolution (no bias) to `num_capsules *
  capsule_dim` channels, split into capsules and LayerNormed.
- `capsules`: the routed capsule layers, bottom to top, each an
  `InvertedAttentionRouting` (`kernel_size` set: convolutional; `None`:
  fully connected), followed by the class capsules (`num_classes`
  capsules). All poses are `sqrt(d) x sqrt(d)` matrices.

`input_mean` and `input_std` are the per-channel CIFAR statistics of the
official training script in [0, 1] units; the model stores them (scaled to
raw pixels) in its `"input_scaling"` Normalization layer.

Training (`main_capsule.py`): SGD with learning rate 0.1 and momentum 0.9,
multiplied by `learning_rate_decay` at each epoch of
`learning_rate_boundaries`; 350 epochs of batch 128; weight decay 5e-4 on all
parameters. PyTorch adds the decay to the gradient, so it goes through the
momentum; Keras' `weight_decay` subtracts `lr * weight_decay * w` directly
each step, so the equivalent (steady-state) Keras value is
`5e-4 / (1 - 0.9) = 5e-3` (`weight_decay`).
"""

_CIFAR_STATISTICS = {
    "input_mean": (0.4914, 0.4822, 0.4465),
    "input_std": (0.2023, 0.1994, 0.2010),
}

_TRAINING = {
    "learning_rate_schedule": "step_decay",
    "batch_size": 128,
    "epochs": 350,
    "learning_rate": 0.1,
    "momentum": 0.9,
    "learning_rate_boundaries": (150, 250),
    "learning_rate_decay": 0.1,
    "pytorch_weight_decay": 5e-4,
    "weight_decay": 5e-3,  # 5e-4 / (1 - momentum), see the module docstring
    "num_iterations": 2,
    "schedule": "concurrent",
    "input_scaling": "normalize",
}

_BACKBONES = {
    "resnet": {
        "stem_filters": 64,
        "stages": [
            {"filters": 64, "num_blocks": 3, "strides": 1},
            {"filters": 128, "num_blocks": 4, "strides": 2},
        ],
    },
    # Conv2D(128, 3x3, stride 2, padding 1) + ReLU: 32x32 -> 16x16x128.
    "simple": {"filters": 128, "kernel_size": 3, "strides": 2},
}


def _capsule_layers(capsule_dim, hidden_fully_connected):
    layers = [
        {"name": "conv_caps_1", "num_capsules": 32,
         "capsule_dim": capsule_dim, "kernel_size": 3, "strides": 2},
        {"name": "conv_caps_2", "num_capsules": 32,
         "capsule_dim": capsule_dim, "kernel_size": 3, "strides": 1},
    ]
    if hidden_fully_connected:
        layers.append({"name": "fc_caps", "num_capsules": 20,
                       "capsule_dim": capsule_dim, "kernel_size": None,
                       "strides": 1})
    return layers


INVERTED_ATTENTION_CAPSNET_PRESETS = {
    "cifar10": {
        "input_shape": (32, 32, 3),
        "num_classes": 10,
        "backbones": _BACKBONES,
        "primary_capsules": {"num_capsules": 32, "capsule_dim": 16},
        # 16x16 -> 7x7 -> 5x5, then 800 -> 10 class capsules.
        "capsules": _capsule_layers(16, hidden_fully_connected=False),
        **_CIFAR_STATISTICS,
        **_TRAINING,
    },
    "cifar100": {
        "input_shape": (32, 32, 3),
        "num_classes": 100,
        "backbones": _BACKBONES,
        "primary_capsules": {"num_capsules": 32, "capsule_dim": 36},
        # 16x16 -> 7x7 -> 5x5, then 800 -> 20 -> 100 class capsules (the
        # fully-connected layer of 20 saves parameters; see issue #7 of
        # apple/ml-capsules-inverted-attention-routing).
        "capsules": _capsule_layers(36, hidden_fully_connected=True),
        **_CIFAR_STATISTICS,
        **_TRAINING,
    },
}
