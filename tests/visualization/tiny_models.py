"""Tiny models and PNG checks shared by the visualization tests."""

import math
import os

import keras
import numpy as np

from keras_caps import layers


def tiny_capsnet(input_shape=(12, 12, 1), num_classes=3, routing="fc_caps",
                 seed=0):
    """An application-like model: the layer names of `EfficientCapsNet`.

    `{"image", "label"}` -> `{"length", "reconstruction"}`, with layers
    `"digit_caps"` (the routing), `"length"`, `"mask"` and `"decoder"`.
    """
    keras.utils.set_random_seed(seed)
    images = keras.Input(input_shape, name="image")
    x = keras.layers.Rescaling(1.0 / 255.0, name="input_scaling")(images)
    x = keras.layers.Conv2D(16, 3, strides=2, activation="relu",
                            name="conv_1")(x)
    capsules = layers.PrimaryCaps(num_capsules=4, capsule_dim=4,
                                  kernel_size=x.shape[1],
                                  name="primary_caps")(x)
    routings = {
        "fc_caps": lambda: layers.FCCaps(num_classes, 4, name="digit_caps"),
        "dynamic_routing": lambda: layers.DynamicRouting(
            num_classes, 4, name="digit_caps"),
        "attention_routing": lambda: layers.AttentionRouting(
            num_classes, 4, num_heads=2, key_dim=4, name="digit_caps"),
    }
    class_capsules = routings[routing]()(capsules)
    lengths = layers.Length(dtype="float32", name="length")(class_capsules)
    labels = keras.Input((num_classes,), name="label")
    masked = layers.Mask(name="mask")([class_capsules, labels])
    decoder = keras.Sequential([
        keras.Input((num_classes * 4,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(math.prod(input_shape), activation="sigmoid"),
        keras.layers.Reshape(input_shape),
    ], name="decoder")
    return keras.Model({"image": images, "label": labels},
                       {"length": lengths, "reconstruction": decoder(masked)})


def tiny_vector_routing_model(input_shape=(8, 12, 1), num_classes=3,
                              seed=0):
    """Conv stem -> positions -> VectorRouting -> VectorRouting -> logits.

    The stem halves each side, so an 8 x 12 image has 4 x 6 = 24 positions.
    """
    keras.utils.set_random_seed(seed)
    images = keras.Input(input_shape, name="image")
    x = keras.layers.Rescaling(1.0 / 255.0, name="input_scaling")(images)
    x = keras.layers.Conv2D(6, 2, strides=2, name="stem")(x)
    num_positions = x.shape[1] * x.shape[2]
    x = keras.layers.Reshape((num_positions, 6), name="positions")(x)
    hidden, _ = layers.VectorRouting(4, 5, num_inputs=num_positions,
                                     name="routing_1")(
        x, return_credit=True)
    logits, _ = layers.VectorRouting(num_classes, 1, num_inputs=4,
                                     name="routing_2")(
        hidden, return_credit=True)
    logits = keras.layers.Reshape((num_classes,), name="logits")(logits)
    return keras.Model(images, logits)


def random_images(num_images, shape, seed=0):
    """Raw images (0-255) with some structure: a bright square each."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 60, (num_images, *shape)).astype("float32")
    for image in images:
        row = rng.integers(0, shape[0] // 2)
        column = rng.integers(0, shape[1] // 2)
        image[row:row + shape[0] // 2, column:column + shape[1] // 2] = 255.0
    return images


def check_png(test_case, figure, path, dpi=40):
    """Saves `figure` as a PNG and checks its pixel size and that it shows
    something (not one flat colour)."""
    import matplotlib.image

    figure.savefig(path, dpi=dpi)
    test_case.assertGreater(os.path.getsize(path), 500)
    pixels = matplotlib.image.imread(path)
    width, height = figure.get_size_inches() * dpi
    # Agg truncates fractional pixel sizes.
    test_case.assertEqual(pixels.shape[:2], (int(height), int(width)))
    grey = pixels[..., :3].mean(axis=-1)
    test_case.assertGreater(grey.std(), 0.05)  # not blank
    test_case.assertGreater((grey < 0.9).mean(), 0.02)  # some ink
    return pixels
