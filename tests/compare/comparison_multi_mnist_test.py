"""`keras-caps compare --dataset multi_mnist` (#23 item 4): every model
read on its two highest scores, per-digit and exact-match accuracy clean
and corrupted, checked against a NumPy top-2 count written here."""

import contextlib
import csv
import io
import json
import os

import keras
import numpy as np
import pytest

from keras_caps import cli
from keras_caps import datasets
from keras_caps.compare import comparison
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import multi_digit_robustness
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison


def _two_best(row):
    """The classes of the two highest scores, ties to the lower class."""
    order = sorted(range(len(row)), key=lambda k: (-row[k], k))
    return set(order[:2])


def _reference_scores(scores, multi_hot):
    """Per image, in plain Python: the share of the true digits among the
    two highest scores, and whether both are."""
    per_digit, exact = [], []
    for row, truth in zip(scores.tolist(), multi_hot.tolist()):
        true = {k for k, value in enumerate(truth) if value == 1}
        found = len(_two_best(row) & true)
        per_digit.append(found / 2)
        exact.append(found == 2)
    return np.array(per_digit), np.array(exact)


@pytest.mark.single_backend
def test_matched_digits_hand_worked():
    scores = np.array([
        [0.1, 0.9, 0.8, 0.0, 0.0],   # top 2 {1, 2}, true {1, 2}: both
        [0.7, 0.2, 0.1, 0.6, 0.0],   # top 2 {0, 3}, true {0, 1}: 1 -> 3
        [0.0, 0.1, 0.2, 0.3, 0.4],   # top 2 {3, 4}, true {0, 1}: none
        [0.5, 0.5, 0.5, 0.0, 0.0]])  # a tie: top 2 {0, 1}, true {1, 2}
    truth = np.array([[0, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 0, 0, 0],
                      [0, 1, 1, 0, 0]])
    true, predicted = multi_digit_robustness.matched_digits(scores, truth)
    assert true.tolist() == [[1, 2], [0, 1], [0, 1], [1, 2]]
    # A digit not found is paired with a predicted class no true digit
    # holds, both in ascending order: 3 -> 0, 4 -> 1 in the third image.
    assert predicted.tolist() == [[1, 2], [0, 3], [3, 4], [1, 0]]
    per_digit, exact = _reference_scores(scores, truth)
    correct = predicted == true
    np.testing.assert_array_equal(correct.mean(axis=1), per_digit)
    np.testing.assert_array_equal(
        multi_digit_robustness.exact_match_correct(correct.reshape(-1)),
        exact)
    # Pairs {1, 2}, {0, 3}, {3, 4}, {0, 1}: each once.
    assert multi_digit_robustness.pair_share(predicted) == 0.25
    assert multi_digit_robustness.pair_share(
        np.array([[2, 5], [5, 2], [2, 5]])) == 1.0


@pytest.mark.single_backend
def test_matched_digits_agree_with_a_python_count():
    rng = np.random.default_rng(3)
    # Scores in tenths: ties are common.
    scores = rng.integers(0, 10, (500, 10)) / 10
    truth = np.zeros((500, 10))
    for row in truth:
        row[rng.choice(10, 2, replace=False)] = 1
    true, predicted = multi_digit_robustness.matched_digits(scores, truth)
    per_digit, exact = _reference_scores(scores, truth)
    np.testing.assert_array_equal((predicted == true).mean(axis=1),
                                  per_digit)
    np.testing.assert_array_equal((predicted == true).all(axis=1), exact)
    for row, true_row, predicted_row in zip(scores, true, predicted):
        # Every predicted class is among the two best, each used once.
        assert set(predicted_row.tolist()) == _two_best(row.tolist())
        assert true_row.tolist() == sorted(true_row.tolist())


def _test_pairs(data_dir, seed):
    test = datasets.load("multi_mnist", "test", batch_size=100,
                         data_dir=data_dir, seed=seed, reconstruction=False,
                         partners_per_digit=2)
    images, multi_hot = (np.concatenate(part)
                         for part in zip(*test.as_numpy_iterator()))
    return images, multi_hot


def _scores(model, images):
    """Class scores of a saved model, read without keras_caps.evaluation."""
    if isinstance(model.input, dict):  # A decoder: two labels an image.
        inputs = {"image": images,
                  "label": np.zeros((len(images), 2, 10), "float32")}
        return model.predict(inputs, verbose=0)["length"]
    return model.predict(images, verbose=0)


class CompareMultiMNISTTest(TestCase):
    def setUp(self):
        super().setUp()
        self.data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(60, seed=0), synthetic_digits(20, seed=1))

    def test_compare_scores_two_digits_clean_and_corrupted(self):
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        results = run_comparison(
            ["self_attention", "cnn"], "multi_mnist", output_dir=output_dir,
            seeds=[0], epochs=1, steps_per_epoch=1, batch_size=8,
            data_dir=self.data_dir, corruptions={"noise": [0.3],
                                                 "occlusion": [10]},
            evaluation_seed=7, isolation="session", partners_per_digit=2)
        self.assertEqual(results["settings"]["partners_per_digit"], 2)
        images, multi_hot = _test_pairs(self.data_dir, seed=7)
        self.assertEqual(len(images), 40)  # 20 test digits, 2 partners.
        sets = {"clean": images,
                "noise:0.3": corruptions.gaussian_noise(images, 0.3,
                                                        7 + 1000),
                "occlusion:10": corruptions.occlusion(images, 10, 7 + 3000)}
        with open(os.path.join(output_dir, "results.csv")) as file:
            rows = {row["router"]: row for row in csv.DictReader(file)}
        exact_correct = {}
        for router in ("self_attention", "cnn"):
            model = keras.saving.load_model(os.path.join(
                comparison.run_dir(output_dir, router, 0), "model.keras"))
            for key, batch in sets.items():
                per_digit, exact = _reference_scores(_scores(model, batch),
                                                     multi_hot)
                self.assertAllClose(float(rows[router][f"{key}_mean"]),
                                    per_digit.mean(), atol=1e-9)
                self.assertAllClose(
                    float(rows[router][f"exact_match:{key}_mean"]),
                    exact.mean(), atol=1e-9)
                exact_correct[router, key] = exact
        # Trainable parameters, by hand: the stem's four convolutions and
        # BatchNorm scales and offsets, 5*5*32+32 + 64 + 3*3*32*64+64 +
        # 128 + 3*3*64*64+64 + 128 + 3*3*64*128+128 + 256 = 130,688; the
        # CNN's head 128*172+172 + 172*10+10 = 23,918: 154,606. The
        # capsule model adds the primary capsules' 5x5 window
        # (5*5*128+128 = 3,328) and FCCaps' 16*10*8*16 weights and 16*10
        # biases (20,640): 154,656.
        self.assertEqual(rows["cnn"]["trainable_parameters"], "154606")
        self.assertEqual(rows["self_attention"]["trainable_parameters"],
                         "154656")
        # McNemar on an exact-match column counts images: its table is
        # that of the two models' exact matches.
        for key in sets:
            (test,) = results["statistics"]["models"]["cnn"][
                f"exact_match:{key}"]["mcnemar"]
            cnn, reference = (exact_correct["cnn", key],
                              exact_correct["self_attention", key])
            self.assertEqual((test["b"], test["c"]),
                             (int(np.sum(cnn & ~reference)),
                              int(np.sum(~cnn & reference))))
        # An exact-match column's relative error is against the clean
        # exact-match accuracy (one seed: the means are the values).
        ratios = results["routers"]["cnn"]["relative_corruption_error"]
        self.assertNotIn("exact_match:clean", ratios)
        self.assertAllClose(
            ratios["exact_match:noise:0.3"],
            (1 - exact_correct["cnn", "noise:0.3"].mean())
            / (1 - exact_correct["cnn", "clean"].mean()))
        self._check_predictions(output_dir, multi_hot)
        with open(os.path.join(output_dir, "results.md")) as file:
            table = file.read()
        self.assertIn("| exact match noise std 0.3 |", table)
        self.assertIn("MultiMNIST (Sabour et al. 2017, section 6)", table)

    def _check_predictions(self, output_dir, multi_hot):
        """`predictions.npz` holds two digits an image: the true ones in
        ascending order and the matched predictions."""
        folder = comparison.run_dir(output_dir, "cnn", 0)
        saved = predictions_lib.read_predictions(folder)
        true = np.array([np.flatnonzero(row) for row in multi_hot])
        np.testing.assert_array_equal(saved["labels"], true.reshape(-1))
        with open(os.path.join(folder, "robustness.json")) as file:
            record = json.load(file)
        self.assertAllClose(np.mean(saved["noise:0.3"] == saved["labels"]),
                            record["noise"]["0.3"])
        self.assertAllClose(record["exact_match"]["noise:0.3"], np.mean(
            (saved["noise:0.3"] == saved["labels"]).reshape(-1, 2).all(1)))

    def test_bad_input(self):
        output_dir = os.path.join(self.get_temp_dir(), "unused")
        kwargs = dict(output_dir=output_dir, seeds=[0], epochs=1,
                      steps_per_epoch=1, data_dir=self.data_dir,
                      isolation="session")
        for arguments, message in (
                (dict(routers=["cnn"], dataset="multi_mnist"),
                 "give `partners_per_digit`"),
                (dict(routers=["cnn"], dataset="mnist",
                      partners_per_digit=2),
                 "invalid value for `partners_per_digit`.*'mnist'"),
                (dict(routers=["cnn", "sabour_cnn"], dataset="multi_mnist",
                      partners_per_digit=2),
                 "'sabour_cnn' has no preset for 'multi_mnist'"),
                (dict(routers=["cnn"], dataset="multi_mnist",
                      partners_per_digit=2, attacks={"fgsm": [0.1]}),
                 "do not apply to MultiMNIST")):
            with self.assertRaisesRegex(ValueError, message):
                run_comparison(**arguments, **kwargs)
        self.assertFalse(os.path.exists(output_dir))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = cli.main(["compare", "--dataset", "multi_mnist",
                             "--routers", "cnn", "--output-dir", output_dir,
                             "--data-dir", self.data_dir])
        self.assertEqual(code, 2)
        self.assertIn("--partners-per-digit", stderr.getvalue())
        self.assertFalse(os.path.exists(output_dir))
