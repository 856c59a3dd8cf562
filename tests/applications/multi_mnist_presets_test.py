"""The MultiMNIST presets of `CapsuleClassifier` and the CNN ladder (#23):
two overlapping digits on 36 x 36, read from the two highest scores.

Counts are derived by hand from the layer shapes; the CNNs' loss is
checked against the binary cross-entropy written in NumPy.
"""

import os

import keras
import numpy as np
import pytest

from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import CNNBaseline
from keras_caps.applications import PositionCNN
from keras_caps.applications import VectorCNN
from keras_caps.testing import TestCase
from tests.applications import stem_counts

_dense = stem_counts.dense
_J, _D = 10, 16  # classes, class-vector size
# The MultiMNIST stem has the MNIST stem's kernels and channels (its third
# convolution has stride 2 instead of 1: no other weights): 130,688.
# 36 -> 32 -> 30 -> 14 -> 6: the primary capsules' window is 5x5 of
# stride 2 on the 6x6x128 map, one filter and a bias per channel.
_STEM = stem_counts.STEM
_WINDOW = 5 * 5 * 128 + 128  # 3,328
# The decoder of the capsule models: 160 -> 512 -> 1024 -> 36 * 36.
_DECODER = _dense(_J * _D, 512) + _dense(512, 1024) + _dense(1024, 36 * 36)

_COUNTS = {
    # FCCaps: 16 x 10 x 8 x 16 weights and a 16 x 10 bias.
    "self_attention": _STEM + _WINDOW + 16 * _J * 8 * _D + 16 * _J,
    # Dynamic routing: one 8 x 16 matrix per primary and class capsule.
    "dynamic": _STEM + _WINDOW + 16 * 8 * _J * _D,
    # The CNN: global pooling, Dense(172), Dense(10).
    "cnn": _STEM + _dense(128, 172) + _dense(172, _J),
    # The ladder's step 1: the window, Dense(148), Dense(10).
    "cnn_positions": _STEM + _WINDOW + _dense(128, 148) + _dense(148, _J),
    # Steps 2 and 3: the window, Dense(71), Dense(10 * 16).
    "cnn_vectors": _STEM + _WINDOW + _dense(128, 71) + _dense(71, _J * _D),
}


def _trainable(model):
    return sum(int(np.prod(weight.shape))
               for weight in model.trainable_weights)


def _pairs(num=2, seed=0):
    """Random 36 x 36 images and two distinct classes each."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (num, 36, 36, 1)).astype("float32")
    labels = np.zeros((num, 2, _J), "float32")
    for index in range(num):
        first, second = rng.choice(_J, 2, replace=False)
        labels[index, 0, first] = labels[index, 1, second] = 1.0
    return images, labels


@pytest.mark.single_backend
def test_preset_parameters_on_multi_mnist():
    assert _COUNTS == {"self_attention": 154656, "dynamic": 154496,
                       "cnn": 154606, "cnn_positions": 154598,
                       "cnn_vectors": 154695}
    built = {
        "self_attention": CapsuleClassifier(
            "multi_mnist", reconstruction=False, compile=False),
        "dynamic": CapsuleClassifier("multi_mnist", router="dynamic",
                                     reconstruction=False, compile=False),
        "cnn": CNNBaseline("multi_mnist", compile=False),
        "cnn_positions": PositionCNN("multi_mnist", compile=False),
        "cnn_vectors": VectorCNN("multi_mnist", reconstruction=False,
                                 compile=False),
    }
    assert {name: _trainable(model) for name, model in built.items()} == (
        _COUNTS)
    with_decoder = VectorCNN("multi_mnist", compile=False)
    assert _trainable(with_decoder) == _COUNTS["cnn_vectors"] + _DECODER
    assert _DECODER == 1936144


class MultiMNISTPresetsTest(TestCase):
    def test_sigmoid_head_training_step(self):
        # Two digits an image: a sigmoid per class, the binary
        # cross-entropy on the two-hot targets.
        model = CNNBaseline("multi_mnist")
        images, labels = _pairs(num=4)
        targets = labels.sum(axis=1)
        probabilities = model.predict(images, verbose=0)
        # Independent of each other: they need not sum to 1.
        self.assertEqual(model.get_layer("probabilities").activation,
                         keras.activations.sigmoid)
        p = np.clip(probabilities.astype("float64"), 1e-7, 1 - 1e-7)
        expected = -np.mean(targets * np.log(p)
                            + (1 - targets) * np.log(1 - p))
        result = model.evaluate(images, targets, return_dict=True,
                                verbose=0)
        self.assertAllClose(result["loss"], expected, atol=1e-5)
        top = np.argsort(-probabilities, axis=-1)[:, :2]
        found = np.take_along_axis(targets, top, axis=-1).sum(axis=-1)
        self.assertAllClose(result["multi_digit_accuracy"],
                            np.mean(found / 2), atol=1e-6)
        self.assertAllClose(result["exact_match_accuracy"],
                            np.mean(found == 2), atol=1e-6)
        history = model.fit(images, targets, epochs=1, batch_size=4,
                            verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))

    def test_capsule_classifier_fits_both_digits(self):
        # The decoder reconstructs each digit from its own class capsule
        # (one step, TensorFlow only: compiling it takes minutes on JAX).
        model = CapsuleClassifier("multi_mnist", jit_compile=False)
        images, labels = _pairs()
        history = model.fit(
            {"image": images, "label": labels},
            {"length": labels.sum(axis=1),
             "reconstruction": np.stack([images / 255] * 2, axis=1)},
            epochs=1, batch_size=2, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        self.assertEqual(model.output_shape,
                         [(None, _J), (None, 2, 36, 36, 1)])

    def test_multi_mnist_round_trip(self):
        model = PositionCNN("multi_mnist")
        images, labels = _pairs()
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        self.assertAllClose(loaded.predict(images, verbose=0),
                            model.predict(images, verbose=0))
        self.assertIsInstance(loaded.loss, keras.losses.BinaryCrossentropy)
        targets = labels.sum(axis=1)
        self.assertEqual(
            loaded.evaluate(images, targets, return_dict=True, verbose=0),
            model.evaluate(images, targets, return_dict=True, verbose=0))
        self.assertEqual(
            sorted(loaded.evaluate(images, targets, return_dict=True,
                                   verbose=0)),
            ["exact_match_accuracy", "loss", "multi_digit_accuracy"])
