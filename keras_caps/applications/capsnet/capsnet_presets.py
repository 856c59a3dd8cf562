"""Per-dataset settings of the original CapsNet (Sabour et al., 2017).

The architecture and the training settings follow the official code,
`research/capsules/` in github.com/Sarasra/models (the MNIST model is
`models/capsule_model.py`).

Architecture variants are data. `conv` is the first convolution (ReLU),
`primary_caps` the `ConvPrimaryCaps` arguments (the official code's 1/32
factor and `(type, h, w)` capsule order included), `capsule_dim` and
`num_iterations` the `DynamicRouting` class capsules. `input_scaling` is
`"rescale"` (pixels / 255 inside the model).

Loss convention: the official code and a literal reading of the paper
weigh the two losses differently, so one has to be chosen. We take the
paper's literal reading, as the Keras port (XifengGuo/CapsNet-Keras) does,
so that the 0.0005 weight means what the paper says. The margin loss is
summed over classes and averaged over the batch
(`keras_caps.losses.MarginLoss`), and the reconstruction loss is 0.0005 x
the sum of squared errors, i.e. `0.0005 * 784 = 0.392` times the per-pixel
MSE on 28 x 28 images. The official code averages its margin over classes
as well, which makes its reconstruction weigh about 20x more. For
MultiMNIST each of the two digits is reconstructed with the 0.0005 x SSE
weight and the two losses are added; Keras averages the reconstruction MSE
over both digits, hence `2 * 0.0005 * 1296 = 1.296`.

Training (the official code and the training command of its README): Adam
1e-3, decayed by 0.96 every 2,000 steps (not staircase) to a floor of 1e-6,
batch 128, 300k steps. The training recipe changes the learning rate once
per epoch, so the decay per epoch is `0.96 ** (468 / 2000)` for the 468
steps of 128 of MNIST's 60,000 training images, and 640 epochs are 299,520
steps. The augmentation is the paper's only one: random integer shifts of
up to 2 pixels per axis with zero fill (`dataset_options`, passed to
`keras_caps.datasets.load`); MultiMNIST shifts each digit by up to 4 pixels
(Sabour) instead of the loader's default 6 (Efficient-CapsNet).
"""

_STEPS_PER_EPOCH = 60_000 // 128

_TRAINING = {
    "learning_rate_schedule": "exponential_decay",
    "batch_size": 128,
    "epochs": 640,
    "learning_rate": 1e-3,
    "learning_rate_decay": 0.96 ** (_STEPS_PER_EPOCH / 2000),
    "min_learning_rate": 1e-6,
}

_ARCHITECTURE = {
    "input_scaling": "rescale",
    "conv": {"filters": 256, "kernel_size": 9, "strides": 1},
    "primary_caps": {"num_types": 32, "capsule_dim": 8, "kernel_size": 9,
                     "strides": 2, "scale": 1.0 / 32.0,
                     "capsule_order": "type_major"},
    "capsule_dim": 16,
    "num_iterations": 3,
}

CAPSNET_PRESETS = {
    "mnist": {
        "input_shape": (28, 28, 1),
        "num_classes": 10,
        "num_objects": 1,
        **_ARCHITECTURE,
        "reconstruction_weight": 0.392,
        "dataset_options": {"augmentation": "shift"},
        **_TRAINING,
    },
    "multi_mnist": {
        "input_shape": (36, 36, 1),
        "num_classes": 10,
        "num_objects": 2,
        **_ARCHITECTURE,
        "reconstruction_weight": 1.296,
        "dataset_options": {"shift": 4},
        **_TRAINING,
    },
}

# Fashion-MNIST has MNIST's format; the architecture and recipe are MNIST's.
CAPSNET_PRESETS["fashion_mnist"] = CAPSNET_PRESETS["mnist"]
