"""MultiMNIST robustness: per-digit and exact-match accuracy, clean and
corrupted, against a NumPy count of each image's two best classes."""

import contextlib
import io
import os

import keras
import numpy as np
import pytest

from keras_caps import cli
from keras_caps import datasets
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import evaluate_robustness
from keras_caps.evaluation import multi_digit_robustness
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _reference(scores, multi_hot):
    """Per-digit and exact-match accuracy, image by image in Python: the
    two highest scores' classes against the two true classes."""
    per_digit, exact = [], []
    for row, truth in zip(scores, multi_hot):
        best = set(sorted(range(len(row)), key=lambda k: -row[k])[:2])
        true = set(np.flatnonzero(truth).tolist())
        per_digit.append(len(best & true) / 2)
        exact.append(best == true)
    return float(np.mean(per_digit)), float(np.mean(exact))


@pytest.mark.single_backend
def test_digit_scores_hand_worked():
    scores = np.array([[0.1, 0.9, 0.8, 0.0],   # top 2: {1, 2}
                       [0.7, 0.2, 0.1, 0.6],   # top 2: {0, 3}
                       [0.0, 0.1, 0.2, 0.3]])  # top 2: {2, 3}
    truth = np.array([[0, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]])
    per_digit, exact = multi_digit_robustness.digit_scores(scores, truth)
    assert per_digit.tolist() == [1.0, 0.5, 0.0]
    assert exact.tolist() == [True, False, False]


class MultiDigitRobustnessTest(TestCase):
    def setUp(self):
        super().setUp()
        self.data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), synthetic_digits(20, seed=1))
        self.path = os.path.join(self.get_temp_dir(), "model.keras")

    def test_clean_and_corrupted_scores(self):
        # Class k of the synthetic digits is a bar at row 2k + 4, 2k + 8
        # once padded by 4: the model sums the rows around it, so it finds
        # both digits of some pairs and one of others.
        inputs = keras.Input((36, 36, 1))
        dense = keras.layers.Dense(10)
        model = keras.Model(inputs, dense(keras.layers.Flatten()(
            keras.layers.Rescaling(1 / 255)(inputs))))
        kernel = np.zeros((36, 36, 10), "float32")
        for k in range(10):
            kernel[2 * k + 7:2 * k + 11, :, k] = 1.0
        dense.set_weights([kernel.reshape(-1, 10), np.zeros(10, "float32")])
        model.save(self.path)
        options = {"partners_per_digit": 2, "shift": 1}
        record = evaluate_robustness(
            self.path, "multi_mnist", data_dir=self.data_dir, seed=5,
            corruptions={"noise": [0.3], "occlusion": [12]}, batch_size=16,
            dataset_options=options)
        test = datasets.load("multi_mnist", "test", batch_size=100,
                             data_dir=self.data_dir, seed=5,
                             reconstruction=False, **options)
        images, multi_hot = (np.concatenate(part) for part in zip(
            *test.as_numpy_iterator()))
        self.assertEqual(record["clean"]["num_images"], 40)
        for key, batch in (
                ("clean", images),
                ("noise:0.3", corruptions.gaussian_noise(images, 0.3,
                                                         5 + 1000)),
                ("occlusion:12", corruptions.occlusion(images, 12,
                                                       5 + 3000))):
            per_digit, exact = _reference(
                model.predict(batch, verbose=0), multi_hot)
            accuracy = (record["clean"]["accuracy"] if key == "clean" else
                        record[key.split(":")[0]][key.split(":")[1]])
            self.assertAllClose(accuracy, per_digit)
            self.assertAllClose(record["exact_match"][key], exact)
            # Both scores informative: some pairs found whole, not all.
            self.assertTrue(0 < exact < per_digit < 1)
        self.assertEqual(record["num_digits"], 2)
        self.assertEqual(record["trainable_parameters"], 36 * 36 * 10 + 10)

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "partners_per_digit"):
            evaluate_robustness(self.path, "multi_mnist",
                                corruptions={"noise": [0.1]})
        with self.assertRaisesRegex(ValueError, "does not apply"):
            evaluate_robustness(self.path, "multi_mnist",
                                corruptions={"affine": True})
        for flags, message in (([], "--partners-per-digit"),):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                code = cli.main(["evaluate", "--model-path", self.path,
                                 "--dataset", "multi_mnist", "--data-dir",
                                 self.data_dir, "--noise", "0.1", *flags])
            self.assertEqual(code, 2)
            self.assertIn(message, stderr.getvalue())

    def test_batchnorm_adaptation_and_predictions(self):
        # A BatchNormalization on the scaled pixels, then the bar-reading
        # dense layer of `test_clean_and_corrupted_scores`; adapted, the
        # layer normalises with the moments of the set it classifies.
        inputs = keras.Input((36, 36, 1))
        norm = keras.layers.BatchNormalization(epsilon=1e-3)
        dense = keras.layers.Dense(10)
        model = keras.Model(inputs, dense(keras.layers.Flatten()(norm(
            keras.layers.Rescaling(1 / 255)(inputs)))))
        kernel = np.zeros((36, 36, 10), "float32")
        for k in range(10):
            # Weights that differ by class, so that the normalisation's
            # shift moves the classes' scores apart: the ranking depends
            # on the statistics.
            kernel[2 * k + 7:2 * k + 11, :, k] = 1.0 + 0.3 * k
        kernel = kernel.reshape(-1, 10)
        dense.set_weights([kernel, np.zeros(10, "float32")])
        gamma, beta = np.float32(2.0), np.float32(-0.5)
        norm.set_weights([np.array([gamma]), np.array([beta]),
                          np.array([0.3], "float32"),
                          np.array([0.05], "float32")])
        folder = os.path.join(self.get_temp_dir(), "predictions")
        os.makedirs(folder)
        options = {"partners_per_digit": 2, "shift": 1}
        record = evaluate_robustness(
            model, "multi_mnist", data_dir=self.data_dir, seed=5,
            corruptions={"noise": [0.3]}, batch_size=16,
            dataset_options=options, adapt_batchnorm=True,
            predictions_dir=folder)
        test = datasets.load("multi_mnist", "test", batch_size=100,
                             data_dir=self.data_dir, seed=5,
                             reconstruction=False, **options)
        images, multi_hot = (np.concatenate(part) for part in zip(
            *test.as_numpy_iterator()))
        for key, batch in (("clean", images),
                           ("noise:0.3", corruptions.gaussian_noise(
                               images, 0.3, 5 + 1000))):
            x = batch.astype("float64") / 255
            normalised = (x - x.mean()) / np.sqrt(x.var() + 1e-3)
            scores = (gamma * normalised + beta).reshape(len(x), -1) @ kernel
            per_digit, exact = _reference(scores, multi_hot)
            self.assertAllClose(record["adapted"]["accuracy"][key],
                                per_digit)
            self.assertAllClose(
                record["adapted"]["accuracy"]["exact_match:" + key], exact)
        self.assertEqual(record["adapted"]["batchnorm_layers"], 1)
        # The stored statistics give other scores.
        self.assertNotEqual(record["adapted"]["accuracy"]["clean"],
                            record["clean"]["accuracy"])
        # The statistics are restored afterwards.
        self.assertAllClose(norm.get_weights()[2:], [[0.3], [0.05]])
        saved = np.load(os.path.join(folder, "predictions.npz"))
        true = np.array([np.flatnonzero(row) for row in multi_hot])
        np.testing.assert_array_equal(saved["labels"], true.reshape(-1))
        self.assertAllClose(np.mean(saved["clean"] == saved["labels"]),
                            record["clean"]["accuracy"])
        self.assertAllClose(
            np.mean(saved["adapted:clean"] == saved["labels"]),
            record["adapted"]["accuracy"]["clean"])
