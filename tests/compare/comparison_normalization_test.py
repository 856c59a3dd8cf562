"""compare's per-image predictions, majority shares, BatchNorm adaptation
and GroupNorm stems (#22, item 3)."""

import contextlib
import io
import json
import os

import keras
import numpy as np

from keras_caps import cli
from keras_caps.compare import comparison
from keras_caps.evaluation import predictions
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison


def _tiny_mnist(folder):
    return write_idx_dataset(folder, synthetic_digits(40, seed=0),
                             synthetic_digits(20, seed=1))


def _read_json(path):
    with open(path) as file:
        return json.load(file)


def _write_json(path, record):
    with open(path, "w") as file:
        json.dump(record, file)


class CompareNormalizationTest(TestCase):
    def test_predictions_match_the_table_and_older_folders_resume(self):
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        kwargs = dict(output_dir=output_dir, seeds=[0], epochs=1,
                      steps_per_epoch=2, batch_size=8, data_dir=data_dir,
                      corruptions={"noise": [0.3]}, evaluation_seed=7,
                      isolation="session")
        results = run_comparison(["cnn"], "mnist", adapt_batchnorm=True,
                                     **kwargs)
        settings = _read_json(os.path.join(output_dir, "compare.json"))
        self.assertIs(settings["adapt_batchnorm"], True)
        self.assertEqual(settings["stem_normalization"], "batch")
        folder = comparison.run_dir(output_dir, "cnn", 0)
        saved = predictions.read_predictions(folder)
        labels = synthetic_digits(20, seed=1)[1]
        np.testing.assert_array_equal(saved["labels"], labels)
        row = results["routers"]["cnn"]
        # The table's numbers are those of the saved predictions.
        for key in ("clean", "noise:0.3"):
            self.assertAllClose(row["accuracy"][key]["mean"],
                                np.mean(saved[key] == labels))
            self.assertAllClose(
                row["adapted_accuracy"][key]["mean"],
                np.mean(saved[f"adapted:{key}"] == labels))
            _, counts = np.unique(saved[key], return_counts=True)
            self.assertAllClose(row["majority_share"][key]["mean"],
                                counts.max() / len(labels))
        self.assertTrue(os.path.exists(os.path.join(folder,
                                                    "confusion.npz")))
        # The model's records are those of a BatchNorm stem, as before.
        run = _read_json(os.path.join(folder, "metrics.json"))
        self.assertNotIn("stem_normalization", run)

        # A folder of an earlier keras_caps: no normalisation settings,
        # no predictions. It resumes as adapt_batchnorm=False, "batch":
        # nothing trains again, the evaluation (and its predictions) is
        # made again.
        del settings["adapt_batchnorm"], settings["stem_normalization"]
        _write_json(os.path.join(output_dir, "compare.json"), settings)
        os.remove(os.path.join(folder, "predictions.npz"))
        again = run_comparison(["cnn"], "mnist", **kwargs)
        self.assertFalse(again["models"][0]["trained_now"])
        self.assertNotIn("adapted_accuracy", again["routers"]["cnn"])
        self.assertIn("majority_share", again["routers"]["cnn"])
        settings = _read_json(os.path.join(output_dir, "compare.json"))
        self.assertIs(settings["adapt_batchnorm"], False)
        self.assertEqual(sorted(predictions.read_predictions(folder)),
                         ["clean", "labels", "noise:0.3"])
        # Another stem is another set of models: refused, nothing written.
        with self.assertRaisesRegex(ValueError,
                                    "stem_normalization: 'batch' before"):
            run_comparison(["cnn"], "mnist", stem_normalization="group",
                               **kwargs)
        self.assertEqual(
            _read_json(os.path.join(output_dir, "compare.json")), settings)

    def test_compare_command_group_norm_stem(self):
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main([
                "compare", "--routers", "cnn", "--seeds", "1", "--epochs",
                "1", "--steps-per-epoch", "2", "--batch-size", "8",
                "--data-dir", data_dir, "--output-dir", output_dir,
                "--noise", "0.2", "--stem-normalization", "group",
                "--adapt-batchnorm", "--isolation", "session"])
        self.assertEqual(code, 0)
        settings = _read_json(os.path.join(output_dir, "compare.json"))
        self.assertEqual(settings["stem_normalization"], "group")
        self.assertIs(settings["adapt_batchnorm"], True)
        folder = comparison.run_dir(output_dir, "cnn", 1)
        self.assertEqual(
            _read_json(os.path.join(folder, "metrics.json"))[
                "stem_normalization"], "group")
        model = keras.saving.load_model(os.path.join(folder, "model.keras"))
        kinds = {type(layer).__name__ for layer in model.layers}
        self.assertIn("GroupNormalization", kinds)
        self.assertNotIn("BatchNormalization", kinds)
        record = _read_json(os.path.join(folder, "robustness.json"))
        self.assertEqual(record["adapted"]["batchnorm_layers"], 0)
        self.assertEqual(record["adapted"]["accuracy"]["noise:0.2"],
                         record["noise"]["0.2"])
