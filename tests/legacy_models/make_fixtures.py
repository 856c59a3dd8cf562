"""Writes the legacy-model fixtures beside this file.

Run once with the code of commit 7b85966 (keras_caps 0.1.0, before the
applications were reorganised); `tests/legacy_models_test.py` checks that
later code loads them and reproduces `outputs.npz`. Do not rerun it with
newer code: the point is files written by the old one.
"""

import os

import keras
import numpy as np

from keras_caps import applications
from keras_caps import layers

FOLDER = os.path.dirname(os.path.abspath(__file__))


def every_layer_model():
    """Every capsule layer and router of the package in one tiny graph,
    with a label-masked decoder as the training models have."""
    image = keras.Input((12, 12, 2), name="image")
    label = keras.Input((3,), name="label")
    x = keras.layers.Conv2D(8, 3, name="conv")(image)  # (b, 10, 10, 8)
    primary = layers.PrimaryCaps(num_capsules=4, capsule_dim=2,
                                 kernel_size=10, name="primary_caps")(x)
    conv_primary = layers.ConvPrimaryCaps(
        num_types=2, capsule_dim=4, kernel_size=3, strides=2,
        name="conv_primary_caps")(x)  # (b, 32, 4)
    routed = [
        layers.FCCaps(3, 4, name="fc_caps")(primary),
        layers.DynamicRouting(3, 4, num_iterations=2,
                              name="dynamic_routing")(conv_primary),
        layers.VectorRouting(3, 4, name="vector_routing")(conv_primary),
        layers.InvertedAttentionRouting(
            3, 4, pose="vector", name="inverted_attention")(conv_primary),
    ]
    summed = keras.layers.Add(name="sum")(routed)  # (b, 3, 4)
    lengths = layers.Length(name="length")(summed)
    masked = layers.Mask(name="mask")([summed, label])
    decoded = keras.layers.Dense(4, name="decoder")(masked)
    return keras.Model([image, label],
                       {"length": lengths, "reconstruction": decoded},
                       name="every_layer")


def main():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    efficient_capsnet = applications.EfficientCapsNet(
        "mnist", input_shape=(16, 16, 1), reconstruction=False)
    graph = every_layer_model()
    arrays = {
        "efficient_capsnet_images": rng.uniform(
            0, 255, (2, 16, 16, 1)).astype("float32"),
        "every_layer_images": rng.normal(
            size=(2, 12, 12, 2)).astype("float32"),
        "every_layer_labels": np.eye(3, dtype="float32")[[0, 2]],
    }
    arrays["efficient_capsnet_scores"] = efficient_capsnet.predict(
        arrays["efficient_capsnet_images"], verbose=0)
    outputs = graph.predict({"image": arrays["every_layer_images"],
                             "label": arrays["every_layer_labels"]},
                            verbose=0)
    arrays["every_layer_length"] = outputs["length"]
    arrays["every_layer_reconstruction"] = outputs["reconstruction"]
    efficient_capsnet.save(
        os.path.join(FOLDER, "efficient_capsnet_16x16.keras"))
    graph.save(os.path.join(FOLDER, "every_layer.keras"))
    np.savez(os.path.join(FOLDER, "outputs.npz"), **arrays)


if __name__ == "__main__":
    main()
