"""Attacks in a robustness evaluation (`evaluate_robustness(attacks=...)`)
and `keras-caps evaluate --fgsm/--pgd`, end to end on tiny models."""

import json
import os

import keras
import numpy as np

from keras_caps import cli
from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import CNNBaseline
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import attacks as attacks_lib
from keras_caps.evaluation import evaluate_robustness
from keras_caps.evaluation import read_predictions
from keras_caps.evaluation import robustness
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

# `synthetic_digits`: class k is a bright bar at rows 2k+4 and 2k+5,
# columns 4 to 23, on noise in [0, 30).
_SCALE = 0.05


def _bar_weights():
    """A linear classifier reading each class's bar: logit_k = 0.05 *
    (sum of bar k's pixels) / 255, so `(784, 10)` weights."""
    kernel = np.zeros((28, 28, 10), "float32")
    for label in range(10):
        kernel[2 * label + 4:2 * label + 6, 4:24, label] = _SCALE
    return kernel.reshape(784, 10)


def _linear_model():
    inputs = keras.Input((28, 28, 1))
    flat = keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(inputs))
    logits = keras.layers.Dense(10, name="logits")(flat)
    model = keras.Model(inputs, logits)
    model.get_layer("logits").set_weights([_bar_weights(),
                                           np.zeros(10, "float32")])
    return model


def _numpy_fgsm(images, labels, epsilon):
    """FGSM on the cross-entropy of the linear model, from its closed-form
    gradient: d CE / d x = W (softmax(z) - onehot) / 255."""
    kernel = _bar_weights().astype("float64")
    flat = images.reshape(len(images), -1).astype("float64")
    logits = flat / 255 @ kernel
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    gradient = (probabilities - np.eye(10)[labels]) @ kernel.T / 255
    adversarial = np.clip(flat + 255 * epsilon * np.sign(gradient), 0, 255)
    return (adversarial / 255 @ kernel).argmax(axis=1)


class AttackEvaluationTest(TestCase):
    def setUp(self):
        super().setUp()
        self.digits, self.labels = synthetic_digits(12, seed=1)
        self.data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), (self.digits, self.labels))
        self.images = self.digits[..., None].astype("float32")

    def test_linear_model_against_closed_form_fgsm(self):
        folder = self.get_temp_dir()
        record = evaluate_robustness(
            _linear_model(), "mnist", data_dir=self.data_dir, seed=3,
            batch_size=8, predictions_dir=folder,
            attacks={"fgsm": [0.0, 0.1, 0.5], "pgd": [1.0],
                     "pgd_steps": 2, "loss": "cross_entropy"})
        self.assertEqual(record["clean"]["accuracy"], 1.0)
        # Epsilon 0 is the clean accuracy, exactly.
        self.assertEqual(record["fgsm"]["0.0"], record["clean"]["accuracy"])
        saved = read_predictions(folder)
        for epsilon in (0.1, 0.5):
            expected = _numpy_fgsm(self.digits, self.labels, epsilon)
            np.testing.assert_array_equal(saved[f"fgsm:{epsilon}"], expected)
            self.assertEqual(record["fgsm"][str(epsilon)],
                             float(np.mean(expected == self.labels)))
        # The bars can be darkened and the others lit: nothing is right
        # at epsilon 1 (and at the large epsilon 0.5, its own run).
        self.assertEqual(record["pgd"], {"0.5": 0.0, "1.0": 0.0})
        self.assertEqual(sorted(saved), [
            "clean", "fgsm:0.0", "fgsm:0.1", "fgsm:0.5", "labels",
            "pgd:0.5", "pgd:1.0"])
        self.assertIsNone(record["attacks"]["vote_target"])  # not asked
        self.assertEqual(record["masking_checks"],
                         attack_checks.masking_checks(record))
        # FGSM turns the bars around between 0.1 and 0.5.
        self.assertEqual((record["fgsm"]["0.1"], record["fgsm"]["0.5"]),
                         (1.0, 0.0))

    def test_vote_attack_follows_the_votes(self):
        model = CapsuleClassifier("mnist", router="dynamic",
                                  reconstruction=False)
        record = evaluate_robustness(
            model, "mnist", data_dir=self.data_dir, seed=3, batch_size=12,
            attacks={"pgd": [0.3], "pgd_steps": 1, "vote": True,
                     "large_epsilon": None})
        self.assertEqual(record["attacks"]["vote_target"], "votes")
        # Vector routing makes no per-child votes, EM routing's lengths
        # are activations, a CNN has no router.
        self.assertTrue(attack_evaluation.has_votes(model))
        for router in ("vector", "em"):
            self.assertFalse(attack_evaluation.has_votes(CapsuleClassifier(
                "mnist", router=router, reconstruction=False)), router)
        self.assertFalse(attack_evaluation.has_votes(CNNBaseline("mnist")))
        # Independently: the attacks' own function with the seed the
        # evaluation documents (seed + 6000 + the epsilon's position).
        predictor = robustness.classifier(model)
        for target, key in (("votes", "vote_pgd"), ("output", "pgd")):
            adversarial = attacks_lib.adversarial_images(
                predictor, self.images, self.labels, epsilon=0.3,
                steps=1, seed=3 + 6000, target=target, loss="score_margin")
            predicted = predictor.predict(adversarial, verbose=0).argmax(-1)
            self.assertEqual(record[key]["0.3"],
                             float(np.mean(predicted == self.labels)))

    def test_evaluate_command_attack_flags(self):
        model = CNNBaseline("mnist", compile=True)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        output = os.path.join(self.get_temp_dir(), "metrics.json")
        folder = os.path.join(self.get_temp_dir(), "predictions")
        code = cli.main([
            "evaluate", "--model-path", path, "--data-dir", self.data_dir,
            "--fgsm", "0", "--pgd", "0.2", "--pgd-steps", "1",
            "--vote-attack", "--masking-epsilon", "0", "--attack-loss",
            "margin", "--output", output, "--predictions-dir",
            folder])
        self.assertEqual(code, 0)
        with open(output) as file:
            record = json.load(file)
        attacked = record["robustness"]
        self.assertEqual(attacked["fgsm"]["0.0"],
                         attacked["clean"]["accuracy"])
        self.assertAllClose(attacked["clean"]["accuracy"],
                            record["test"]["accuracy"])
        # A CNN has no votes: its vote attack is its PGD.
        self.assertEqual(attacked["attacks"]["vote_target"], "output")
        self.assertEqual(attacked["vote_pgd"], attacked["pgd"])
        self.assertEqual(attacked["attacks"]["large_epsilon"], None)
        self.assertEqual(attacked["attacks"]["loss"], "margin")
        saved = read_predictions(folder)
        np.testing.assert_array_equal(saved["vote_pgd:0.2"], saved["pgd:0.2"])
        loaded = robustness.classifier(keras.saving.load_model(path))
        settings = {key: value for key, value in attacked["attacks"].items()
                    if key != "vote_target"}
        adversarial = attack_evaluation.adversarial_set(
            loaded, self.images, self.labels,
            attack_evaluation.check_attacks(settings), "pgd", 0.2, 1234)
        np.testing.assert_array_equal(
            saved["pgd:0.2"],
            loaded.predict(adversarial, verbose=0).argmax(-1))
