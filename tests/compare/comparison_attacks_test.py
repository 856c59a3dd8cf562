"""Attacks in `keras-caps compare`: columns, the transfer attack from the
CNN, the masking checks, and attacks added to a finished comparison."""

import csv
import os

import keras
import numpy as np

from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison
from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_results
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attacks as attacks_lib
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation import robustness
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison

_ATTACKS = {"fgsm": [0.1], "pgd": [0.1], "pgd_steps": 1, "vote": True}
_SEED = 7  # The evaluation seed; PGD's random starts: 7 + 6000.


def _folder(output_dir, router):
    return comparison.run_dir(output_dir, router, 0)


def _classifier(output_dir, router):
    return robustness.classifier(keras.saving.load_model(
        os.path.join(_folder(output_dir, router), "model.keras")))


def _accuracy(predictor, images, labels):
    return float(np.mean(
        predictor.predict(images, verbose=0).argmax(-1) == labels))


class CompareAttacksTest(TestCase):
    def test_attacks_added_to_a_finished_comparison(self):
        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(40, seed=0), synthetic_digits(16, seed=1))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        kwargs = dict(output_dir=output_dir, seeds=[0], epochs=1,
                      steps_per_epoch=1, batch_size=16, data_dir=data_dir,
                      evaluation_seed=_SEED, isolation="session",
                      reconstruction=False)
        run_comparison(["uniform", "cnn"], "mnist", **kwargs)
        model_path = os.path.join(_folder(output_dir, "cnn"), "model.keras")
        trained = os.path.getmtime(model_path)

        # Attacks on the finished comparison (and BatchNorm statistics
        # adapted to each attacked set): evaluated, not retrained.
        kwargs["adapt_batchnorm"] = True
        results = run_comparison(["uniform", "cnn"], "mnist",
                                     attacks=_ATTACKS, **kwargs)
        self.assertFalse(any(run["trained_now"] for run in results["models"]))
        self.assertEqual(os.path.getmtime(model_path), trained)
        keys = ["fgsm:0.1", "pgd:0.1", "pgd:0.5", "vote_pgd:0.1",
                "transfer_pgd:0.1"]
        self.assertEqual([key for key, _ in comparison_results.columns(
            ComparisonSettings.from_record(results["settings"]))][1:], keys)

        # Independently, with the attacks' own function: white-box PGD on
        # each model, and the CNN's PGD images classified by the other.
        digits, labels = synthetic_digits(16, seed=1)
        images = digits[..., None].astype("float32")
        cnn = _classifier(output_dir, "cnn")
        transferred = attacks_lib.adversarial_images(
            cnn, images, labels, epsilon=0.1, steps=1, seed=_SEED + 6000,
            loss="score_margin")  # the default of compare's attacks
        expected = {"cnn": _accuracy(cnn, transferred, labels)}
        uniform = _classifier(output_dir, "uniform")
        expected["uniform"] = _accuracy(uniform, transferred, labels)
        white_box = attacks_lib.adversarial_images(
            uniform, images, labels, epsilon=0.1, steps=1, seed=_SEED + 6000,
            loss="score_margin")
        with open(os.path.join(output_dir, "results.csv")) as file:
            rows = {row["router"]: row for row in csv.DictReader(file)}
        for router in ("uniform", "cnn"):
            self.assertEqual(float(rows[router]["transfer_pgd:0.1_mean"]),
                             expected[router])
        self.assertEqual(float(rows["uniform"]["pgd:0.1_mean"]),
                         _accuracy(uniform, white_box, labels))
        # The CNN's transfer attack is its own white-box PGD, and so is
        # its vote attack (no votes), which the table says.
        self.assertEqual(rows["cnn"]["pgd:0.1_mean"],
                         rows["cnn"]["transfer_pgd:0.1_mean"])
        self.assertEqual(rows["cnn"]["pgd:0.1_mean"],
                         rows["cnn"]["vote_pgd:0.1_mean"])

        adapted = results["routers"]["uniform"]["adapted_accuracy"]
        self.assertEqual(sorted(adapted), sorted(["clean", *keys]))
        # The per-image tests cover the attack columns (predictions.npz).
        tests = results["statistics"]["models"]["cnn"]
        for key in keys:
            self.assertIsNotNone(tests[key]["mcnemar"][0], key)
        # The masking checks: each seed's, beside the row.
        row = results["routers"]["uniform"]
        evaluation = comparison_attacks.with_transfer(
            results["models"][0]["evaluation"],
            comparison_attacks.transfer_record(
                ComparisonSettings.from_record(results["settings"]),
                output_dir, "uniform", 0,
                comparison.run_dir))
        self.assertEqual(row["masking_checks"]["per_seed"],
                         [attack_checks.masking_checks(evaluation)])
        with open(os.path.join(output_dir, "results.md")) as file:
            table = file.read()
        self.assertIn("| model | non-increasing in ε | near 0 at large ε "
                      "| PGD ≤ FGSM | transfer ≥ white-box |", table)
        self.assertIn("transfer PGD ε 0.1", table)
        self.assertTrue(os.path.exists(os.path.join(
            output_dir, "accuracy_vs_epsilon.png")))
        self.assertIn("so that the vote attack does not apply (cnn: no "
                      "router", table)
        self.assertEqual(rows["uniform"]["masking_checks"],
                         "pass" if row["masking_checks"]["passed"]
                         else "fail")

        # Resumed with the same attacks: nothing evaluated again.
        files = [os.path.join(_folder(output_dir, router), name)
                 for router in ("uniform", "cnn")
                 for name in ("robustness.json", "transfer.json")]
        before = [os.path.getmtime(path) for path in files]
        again = run_comparison(["uniform", "cnn"], "mnist",
                                   attacks=_ATTACKS, **kwargs)
        self.assertEqual([os.path.getmtime(path) for path in files], before)
        self.assertEqual(again["routers"]["uniform"]["accuracy"],
                         results["routers"]["uniform"]["accuracy"])
        _check_attack_subset(self, kwargs, output_dir)


def _check_attack_subset(test, kwargs, output_dir):
    """Resumed with `attack_images=6`: evaluated again (nothing trained)
    with every attack column, the transfer included, on the first 6 test
    images, and the masking checks' epsilon 0 their clean accuracy."""
    # PGD only (no FGSM, vote attack or large epsilon), to stay short.
    results = run_comparison(["uniform", "cnn"], "mnist", attacks={
        "pgd": [0.1], "pgd_steps": 1, "large_epsilon": None,
        "attack_images": 6}, **kwargs)
    test.assertFalse(any(run["trained_now"] for run in results["models"]))
    test.assertEqual(results["settings"]["attacks"]["attack_images"], 6)
    digits, labels = synthetic_digits(16, seed=1)
    images, labels = digits[:6, ..., None].astype("float32"), labels[:6]
    cnn, uniform = (_classifier(output_dir, router)
                    for router in ("cnn", "uniform"))
    transferred, white_box = (attacks_lib.adversarial_images(
        source, images, labels, epsilon=0.1, steps=1, seed=_SEED + 6000,
        loss="score_margin") for source in (cnn, uniform))
    with open(os.path.join(output_dir, "results.csv")) as file:
        rows = {row["router"]: row for row in csv.DictReader(file)}
    test.assertEqual(float(rows["uniform"]["transfer_pgd:0.1_mean"]),
                     _accuracy(uniform, transferred, labels))
    test.assertEqual(float(rows["uniform"]["pgd:0.1_mean"]),
                     _accuracy(uniform, white_box, labels))
    saved = predictions_lib.read_predictions(_folder(output_dir, "uniform"))
    np.testing.assert_array_equal(saved["labels:attacks"], labels)
    test.assertEqual(len(saved["clean"]), 16)
    for key in ("pgd:0.1", "transfer_pgd:0.1", "adapted:transfer_pgd:0.1"):
        test.assertEqual(len(saved[key]), 6, key)
    for key in ("pgd:0.1", "transfer_pgd:0.1"):
        test.assertIsNotNone(
            results["statistics"]["models"]["cnn"][key]["mcnemar"][0], key)
    clean_subset = float(np.mean(saved["clean"][:6] == labels))
    per_seed = results["routers"]["uniform"]["masking_checks"]["per_seed"]
    test.assertEqual(per_seed[0]["checks"][0]["values"]["0"], clean_subset)
    test.assertEqual(results["routers"]["uniform"]["attack_clean"]["mean"],
                     clean_subset)
    with open(os.path.join(output_dir, "results.md")) as file:
        test.assertIn("the first 6 test images only", file.read())
