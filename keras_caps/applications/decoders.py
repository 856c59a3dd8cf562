"""Reconstruction decoders of capsule networks.

The decoders of the official Efficient-CapsNet code
(github.com/EscVM/Efficient-CapsNet, in
`models/efficient_capsnet_graph_{mnist,smallnorb,multimnist}.py`): a dense
one for MNIST and MultiMNIST (the layers of the CapsNet decoder of Sabour
et al., 2017, which `CapsNet` uses too), a convolutional one for smallNORB.

A decoder maps masked, flattened capsules to an image in [0, 1]. The last
layer is float32 so the reconstruction loss stays float32 under mixed
precision.
"""

import math

import keras

from keras_caps import model_roles as roles


def dense_decoder(input_dim, output_shape, num_objects=1,
                  name=roles.DECODER):
    """The MNIST decoder: Dense 512 -> Dense 1024 -> Dense (sigmoid) -> image.

    Args:
        input_dim: int. Number of masked capsule values,
            `num_capsules * capsule_dim`.
        output_shape: tuple. Shape of one reconstructed image.
        num_objects: int. With more than one, the decoder takes
            `(batch, num_objects, input_dim)` and reconstructs one image per
            object with the same weights (MultiMNIST).
        name: str.

    Returns:
        A `keras.Sequential` from `(batch, [num_objects,] input_dim)` to
        `(batch, [num_objects,] *output_shape)`.
    """
    leading = (num_objects,) if num_objects > 1 else ()
    return keras.Sequential(
        [
            keras.Input(leading + (input_dim,)),
            keras.layers.Dense(512, activation="relu",
                               kernel_initializer="he_normal",
                               name="dense_1"),
            keras.layers.Dense(1024, activation="relu",
                               kernel_initializer="he_normal",
                               name="dense_2"),
            keras.layers.Dense(math.prod(output_shape), activation="sigmoid",
                               kernel_initializer="glorot_normal",
                               dtype="float32", name="dense_3"),
            keras.layers.Reshape(leading + tuple(output_shape),
                                 dtype="float32", name="image"),
        ],
        name=name,
    )


def conv_decoder(input_dim, output_shape, name=roles.DECODER):
    """The smallNORB decoder: Dense 64 -> 8x8 -> bilinear upsampling + convs.

    Spatial sizes: 8 -> 16 -> 14 -> 28 -> 26 -> 52 -> 50 -> 48, so it
    reconstructs 48x48 images only. Convolutions use leaky ReLU with slope
    0.2 and Keras' default initialisers, as in the official code.

    Args:
        input_dim: int. Number of masked capsule values.
        output_shape: tuple. Must be `(48, 48, channels)`.
        name: str.

    Returns:
        A `keras.Sequential` from `(batch, input_dim)` to
        `(batch, 48, 48, channels)`.
    """
    if tuple(output_shape[:2]) != (48, 48):
        raise ValueError(
            "The convolutional decoder reconstructs 48x48 images only. "
            f"Received: output_shape={tuple(output_shape)}")
    channels = output_shape[-1]

    def upsample(index):
        return keras.layers.UpSampling2D(2, interpolation="bilinear",
                                         name=f"upsampling_{index}")

    def conv(filters, index, **kwargs):
        kwargs.setdefault("activation", "leaky_relu")
        return keras.layers.Conv2D(filters, 3, name=f"conv_{index}",
                                   **kwargs)

    return keras.Sequential(
        [
            keras.Input((input_dim,)),
            keras.layers.Dense(64, name="dense"),
            keras.layers.Reshape((8, 8, 1), name="reshape"),
            upsample(1),
            conv(64, 1),
            upsample(2),
            conv(128, 2),
            upsample(3),
            conv(128, 3),
            conv(channels, 4, activation="sigmoid", dtype="float32"),
        ],
        name=name,
    )
