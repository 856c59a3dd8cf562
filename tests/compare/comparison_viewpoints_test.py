"""`compare --viewpoints` on mocked smallNORB (Hinton et al. 2018, §5.1).

The mock of `tests/datasets/smallnorb_viewpoints_test.py`: one image per
(azimuth, elevation), each image constant, so the loaded test images and
which of them are seen from the familiar azimuths (300-40 degrees, TFDS
labels 15, 16, 17, 0, 1, 2) are known here without keras_caps' loaders.
"""

import contextlib
import csv
import io
import json
import os
from unittest import mock

import keras
import numpy as np

from keras_caps import cli
from keras_caps.compare import comparison
from keras_caps.compare import comparison_significance
from keras_caps.testing import TestCase
from tests.compare.comparisons import run_comparison
from tests.datasets.smallnorb_viewpoints_test import AZIMUTHS
from tests.datasets.smallnorb_viewpoints_test import CATEGORIES
from tests.datasets.smallnorb_viewpoints_test import INDICES
from tests.datasets.smallnorb_viewpoints_test import grid_mock

FAMILIAR = np.isin(AZIMUTHS, [15, 16, 17, 0, 1, 2])


def _correct(model_path):
    """Whether a saved model classifies each test image of the mock
    right, predicted here from the mock's pixel values."""
    model = keras.saving.load_model(model_path)
    # Every 48 x 48 crop of both resized views of image i is i.
    images = np.broadcast_to(INDICES[:, None, None, None].astype("float32"),
                             (len(INDICES), 48, 48, 2))
    return model.predict(images, verbose=0).argmax(-1) == CATEGORIES


class CompareViewpointsTest(TestCase):
    def test_familiar_and_novel_columns(self):
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        with grid_mock():
            results = run_comparison(
                ["cnn"], "smallnorb", output_dir=output_dir, seeds=[0],
                epochs=1, steps_per_epoch=1, batch_size=4,
                isolation="session", viewpoints="azimuth",
                until_accuracy=0.99)
        run = comparison.run_dir(output_dir, "cnn", 0)
        correct = _correct(os.path.join(run, "model.keras"))
        expected = {"familiar": float(correct[FAMILIAR].mean()),
                    "novel": float(correct[~FAMILIAR].mean())}
        # The per-image right/wrong the paired tests read, in test order.
        for name, chosen in (("familiar", FAMILIAR), ("novel", ~FAMILIAR)):
            np.testing.assert_array_equal(
                comparison_significance.per_image_correct(
                    run, f"viewpoints:{name}"), correct[chosen])
        with open(os.path.join(output_dir, "results.csv")) as file:
            row = next(csv.DictReader(file))
        for name in ("familiar", "novel"):
            self.assertAllClose(float(row[f"viewpoints:{name}_mean"]),
                                expected[name], atol=1e-9)
        with open(os.path.join(run, "metrics.json")) as file:
            metrics = json.load(file)
        # `train` tests on both sets too; the model was selected on the
        # holdout of the familiar training images (5 of the mock's 54).
        self.assertEqual(metrics["dataset_options"], {"viewpoints": "azimuth"})
        self.assertAllClose(metrics["test_familiar"]["accuracy"],
                            expected["familiar"], atol=1e-6)
        self.assertAllClose(metrics["test_novel"]["accuracy"],
                            expected["novel"], atol=1e-6)
        self.assertEqual(metrics["until_accuracy"]["target"], 0.99)
        evaluation = results["models"][0]["evaluation"]
        self.assertEqual(evaluation["viewpoint_images"],
                         {"split": "azimuth", "familiar": 54, "novel": 108})
        with open(os.path.join(output_dir, "results.md")) as file:
            table = file.read()
        self.assertIn("| familiar viewpoints | novel viewpoints |", table)
        # Viewpoints are no corruption: no relative corruption error.
        self.assertNotIn("Relative corruption error", table)
        self.assertEqual(results["routers"]["cnn"][
            "relative_corruption_error"], {})
        ratio = (1 - expected["novel"]) / max(1 - expected["familiar"],
                                              1e-12)
        self.assertIn(f"- cnn: {ratio:.2f}", table)
        with open(os.path.join(output_dir, "compare.json")) as file:
            self.assertEqual(json.load(file)["viewpoints"], "azimuth")

    def test_viewpoints_on_another_dataset_are_refused(self):
        output_dir = os.path.join(self.get_temp_dir(), "unused")
        for command in (["compare", "--dataset", "mnist"],
                        ["train", "--dataset", "fashion_mnist",
                         "--model", "cnn"]):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                code = cli.main([*command, "--viewpoints", "azimuth",
                                 "--output-dir", output_dir])
            self.assertEqual(code, 2, command)
            self.assertRegex(stderr.getvalue(),
                             r"error: .*`viewpoints`.*mnist'")
        self.assertFalse(os.path.exists(output_dir))

    def test_train_passes_viewpoints_to_the_loader(self):
        output_dir = os.path.join(self.get_temp_dir(), "run")
        with mock.patch("keras_caps.training.train",
                        return_value={}) as train, contextlib.redirect_stdout(
                            io.StringIO()):
            code = cli.main(["train", "--dataset", "smallnorb",
                             "--viewpoints", "elevation", "--output-dir",
                             output_dir])
        self.assertEqual(code, 0)
        self.assertEqual(train.call_args.kwargs["dataset_options"],
                         {"viewpoints": "elevation"})
