"""The canvas tests of Sabour et al.'s protocol: affNIST's own files and the
translated-only set, in `evaluate_robustness`, `evaluate` and `compare`."""

import contextlib
import io
import os

import numpy as np
import pytest

from keras_caps import cli
from keras_caps.applications import CNNBaseline
from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison_results
from keras_caps.datasets import affnist
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import evaluate_robustness
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation import robustness
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_affnist_test_set
from keras_caps.testing import write_idx_dataset


def _canvas(digits):
    """28 x 28 digits centred on a 40 x 40 canvas (a margin of 6)."""
    return np.pad(digits, ((0, 0), (6, 6), (6, 6)))[..., None].astype(
        "float32")


def _placements(moved, digits):
    """For each moved canvas, every (row, column) where the whole digit
    lies with nothing else on the canvas (searched over all 13 x 13)."""
    found = []
    for image, digit in zip(moved[..., 0], digits):
        found.append([(row, col) for row in range(13) for col in range(13)
                      if np.array_equal(image[row:row + 28, col:col + 28],
                                        digit)
                      and image.sum() == digit.sum()])
    return found


@pytest.mark.single_backend
def test_translated_set_moves_every_digit_whole():
    digits, _ = synthetic_digits(150, seed=3)
    digits = digits.astype("float32")
    moved = corruptions.translated_test_set(_canvas(digits), 6, seed=11)
    placements = _placements(moved, digits)
    # Each digit is found, intact, at some position, alone on the canvas.
    assert all(len(found) >= 1 for found in placements)
    rows = [found[0][0] for found in placements]
    cols = [found[0][1] for found in placements]
    # 150 draws over 13 positions per axis reach both edges and the centre
    # (a uniform draw misses an edge with probability (12/13)^150 < 1e-5).
    for axis in (rows, cols):
        assert min(axis) == 0 and max(axis) == 12 and 6 in axis
    np.testing.assert_array_equal(
        moved, corruptions.translated_test_set(_canvas(digits), 6, seed=11))
    assert not np.array_equal(
        moved, corruptions.translated_test_set(_canvas(digits), 6, seed=12))
    np.testing.assert_array_equal(
        corruptions.translated_test_set(_canvas(digits), 0, seed=11),
        _canvas(digits))
    with pytest.raises(ValueError, match="max_shift"):
        corruptions.translated_test_set(_canvas(digits), -1, seed=0)


@pytest.mark.single_backend
def test_generated_ranges_are_affnists():
    # Tieleman (2013): rotation within +-20 degrees, shear within +-0.2,
    # each axis scaled by 0.8 to 1.2.
    assert corruptions.MAX_ROTATION_DEGREES == 20.0
    assert corruptions.MAX_SHEAR == 0.2
    assert corruptions.SCALE_RANGE == (0.8, 1.2)
    parameters = corruptions.random_affine_parameters(4000, seed=5)
    degrees = np.degrees(parameters["rotation"])
    assert -20 <= degrees.min() < -19.5 and 19.5 < degrees.max() <= 20
    assert -0.2 <= parameters["shear"].min() < -0.19
    assert 0.19 < parameters["shear"].max() <= 0.2
    for key in ("scale_x", "scale_y"):
        assert 0.8 <= parameters[key].min() < 0.81
        assert 1.19 < parameters[key].max() <= 1.2
    # Independent per axis, as affNIST draws them.
    assert abs(np.corrcoef(parameters["scale_x"],
                           parameters["scale_y"])[0, 1]) < 0.05


def _accuracy(model, images, labels):
    predicted = model.predict(np.asarray(images, "float32"),
                              verbose=0).argmax(-1)
    return float(np.mean(predicted == labels))


class CanvasTestsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.digits, self.labels = synthetic_digits(24, seed=1)
        self.data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), (self.digits, self.labels))
        rng = np.random.default_rng(4)
        self.affnist_images = rng.integers(0, 256, (64, 40, 40), "uint8")
        self.affnist_labels = rng.integers(0, 10, 64)
        self.affnist_dir = write_affnist_test_set(
            os.path.join(self.get_temp_dir(), "affnist"),
            self.affnist_images, self.affnist_labels)
        self._real_size = affnist.TEST_IMAGES
        affnist.TEST_IMAGES = 64  # 32 batches of 2 images.
        # The checks refuse before the model is read.
        self.path = os.path.join(self.get_temp_dir(), "model.keras")

    def tearDown(self):
        affnist.TEST_IMAGES = self._real_size
        super().tearDown()

    def test_affnist_files_and_translated_set(self):
        model = CNNBaseline("mnist_canvas")
        # Biased so that the untrained model is right on some images only.
        kernel, _ = model.get_layer("probabilities").get_weights()
        model.get_layer("probabilities").set_weights(
            [kernel, np.linspace(0, 3, 10).astype("float32")])
        model.save(self.path)
        folder = os.path.join(self.get_temp_dir(), "predictions")
        record = evaluate_robustness(
            self.path, "mnist_canvas", data_dir=self.data_dir, seed=5,
            corruptions={"affine": True, "affnist_dir": self.affnist_dir,
                         "translated": True},
            batch_size=8, predictions_dir=folder)
        self.assertEqual(record["affine_set"], "affNIST (Tieleman)")
        self.assertAllClose(record["affine"], _accuracy(
            model, self.affnist_images[..., None],
            self.affnist_labels))
        moved = corruptions.translated_test_set(_canvas(self.digits), 6,
                                                5 + 5000)
        self.assertAllClose(record["translated"],
                            _accuracy(model, moved, self.labels))
        saved = predictions_lib.read_predictions(folder)
        self.assertEqual(saved["labels:affine"].tolist(),
                         self.affnist_labels.tolist())
        # Image by image, in the files' order.
        self.assertEqual(saved["affine"].tolist(), model.predict(
            self.affnist_images[..., None].astype("float32"),
            verbose=0).argmax(-1).tolist())
        self.assertEqual(len(saved["translated"]), 24)
        self.assertEqual(robustness.affine_set_name({"affine": True}),
                         "generated affine set")

    def test_checks(self):
        checked = robustness.check_corruptions(
            "mnist_canvas", {"affine": True, "affnist_dir": self.affnist_dir})
        self.assertEqual(checked["affnist_dir"],
                         os.path.abspath(self.affnist_dir))
        self.assertNotIn("translated", checked)
        # Without the options, the record is that of earlier versions.
        self.assertEqual(sorted(robustness.check_corruptions(
            "mnist_canvas", {"affine": True})),
            ["affine", "noise", "occlusion", "pixels"])
        for corruption, message in (
                ({"affnist_dir": self.affnist_dir}, "ask for that test"),
                ({"affine": True, "affnist_dir": "/no/such/folder"},
                 "affnist_dir='/no/such/folder'"),
                ({"translated": 1}, "expected a bool")):
            with self.assertRaisesRegex((ValueError, TypeError), message):
                robustness.check_corruptions("mnist_canvas", corruption)
        with self.assertRaisesRegex(ValueError, "does not apply to 'mnist'"):
            robustness.check_corruptions("mnist", {"translated": True})

    def test_evaluate_command_names_the_missing_file(self):
        os.remove(os.path.join(self.affnist_dir, "test_batches", "9.mat"))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = cli.main(["evaluate", "--model-path", self.path,
                             "--dataset", "mnist_canvas", "--data-dir",
                             self.data_dir, "--affine", "--affnist-dir",
                             self.affnist_dir, "--translated"])
        self.assertEqual(code, 2)
        self.assertRegex(stderr.getvalue(), r"9\.mat' is missing")


@pytest.mark.single_backend
def test_comparison_columns_name_the_affine_set():
    base = {"noise": [], "pixels": [], "occlusion": [], "affine": True}
    assert comparison_results.columns(
        ComparisonSettings(corruptions=base))[-1] == (
        "affine", "affine (generated)")
    real = {**base, "affnist_dir": "/data/affnist", "translated": True}
    assert comparison_results.columns(
        ComparisonSettings(corruptions=real))[-2:] == [
        ("affine", "affNIST (Tieleman)"), ("translated", "translated")]
