import contextlib
import hashlib
import io
import os

import keras
import numpy as np
import pytest

from keras_caps import cli
from keras_caps.applications import CNNBaseline
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import evaluate_robustness
from keras_caps.evaluation import predictions
from keras_caps.evaluation.batchnorm_adaptation import adapted_batchnorm
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


@pytest.mark.single_backend
class PredictionsFileTest(TestCase):
    def test_majority_share_and_confusion_by_hand(self):
        # 5 of 8 images predicted as class 2: 5 / 8.
        self.assertEqual(predictions.majority_share(
            [2, 0, 2, 2, 1, 2, 2, 0]), 0.625)
        self.assertEqual(predictions.majority_share([4, 4, 4]), 1.0)
        # Rows: true 0, 1, 2; columns: predicted.
        # true 0 -> 0, 2; true 1 -> 1; true 2 -> 2, 2, 0.
        matrix = predictions.confusion_matrix(
            [0, 0, 1, 2, 2, 2], [0, 2, 1, 2, 2, 0], 3)
        self.assertEqual(matrix.tolist(), [[1, 0, 1], [0, 1, 0], [1, 0, 2]])

    def test_round_trip_dtypes_and_bad_files(self):
        folder = self.get_temp_dir()
        labels = np.array([0, 1, 2, 1])
        predictions.write_predictions(
            folder, {"labels": labels, "clean": [0, 1, 1, 1],
                     "noise:0.1": [2, 2, 2, 2], "affine": [1, 1],
                     "labels:affine": [1, 0]}, num_classes=3)
        read = predictions.read_predictions(folder)
        self.assertEqual(sorted(read), ["affine", "clean", "labels",
                                        "labels:affine", "noise:0.1"])
        self.assertEqual(read["clean"].dtype, np.uint8)
        np.testing.assert_array_equal(read["labels"], labels)
        with np.load(os.path.join(folder, "confusion.npz")) as data:
            self.assertEqual(data["affine"].tolist(),
                             [[0, 1, 0], [0, 1, 0], [0, 0, 0]])
            self.assertEqual(data["noise:0.1"][:, 2].tolist(), [1, 2, 1])
            self.assertNotIn("labels", data.files)
        # Over 256 classes: int16.
        wide = os.path.join(folder, "wide")
        predictions.write_predictions(wide, {"labels": [300], "clean": [299]},
                                      num_classes=301)
        self.assertEqual(predictions.read_predictions(wide)["clean"].dtype,
                         np.int16)
        self.assertEqual(predictions.read_predictions(wide)["clean"][0], 299)

        with self.assertRaisesRegex(FileNotFoundError, "No per-image"):
            predictions.read_predictions(os.path.join(folder, "none"))
        broken = os.path.join(folder, "broken")
        os.makedirs(broken)
        with open(os.path.join(broken, "predictions.npz"), "wb") as file:
            file.write(b"PK\x03\x04 truncated")
        with self.assertRaisesRegex(ValueError, "not a readable predictions"):
            predictions.read_predictions(broken)
        np.savez(os.path.join(broken, "predictions.npz"),
                 labels=np.zeros(3, "uint8"), clean=np.zeros(2, "uint8"))
        with self.assertRaisesRegex(ValueError, "'clean' should be a 1-D"):
            predictions.read_predictions(broken)
        np.savez(os.path.join(broken, "predictions.npz"),
                 clean=np.zeros(2, "uint8"))
        with self.assertRaisesRegex(ValueError, "no 'labels' array"):
            predictions.read_predictions(broken)


def _file_digest(path):
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


class EvaluationPredictionsTest(TestCase):
    def test_predictions_majority_share_and_adapted_batchnorm(self):
        digits, labels = synthetic_digits(24, seed=1)
        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), (digits, labels))
        model = CNNBaseline("mnist")
        kernel, _ = model.get_layer("probabilities").get_weights()
        model.get_layer("probabilities").set_weights(
            [kernel, np.linspace(0, 3, 10).astype("float32")])
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        digest = _file_digest(path)
        folder = os.path.join(self.get_temp_dir(), "predictions")
        record = evaluate_robustness(
            path, "mnist", data_dir=data_dir, seed=5, batch_size=8,
            corruptions={"noise": [0.4]},
            predictions_dir=folder, adapt_batchnorm=True)
        self.assertEqual(_file_digest(path), digest)  # The file unchanged.
        saved = predictions.read_predictions(folder)
        keys = ["clean", "noise:0.4"]
        self.assertEqual(sorted(saved), sorted(
            ["labels"] + keys + [f"adapted:{key}" for key in keys]))
        np.testing.assert_array_equal(saved["labels"], labels)
        # The accuracies recomputed from the file are the record's.
        accuracy = {key: np.mean(saved[key] == labels) for key in keys}
        self.assertAllClose(record["clean"]["accuracy"], accuracy["clean"])
        self.assertAllClose(record["noise"]["0.4"], accuracy["noise:0.4"])
        # The majority share, counted with np.unique.
        for key in keys:
            _, counts = np.unique(saved[key], return_counts=True)
            self.assertAllClose(record["majority_share"][key],
                                counts.max() / len(labels))
            self.assertAllClose(record["adapted"]["accuracy"][key],
                                np.mean(saved[f"adapted:{key}"] == labels))
        self.assertEqual(record["adapted"]["batchnorm_layers"], 4)
        # Independently: the saved model's own predictions, frozen and
        # with the stem's statistics adapted to the noisy images.
        loaded = keras.saving.load_model(path)
        images = digits[..., None].astype("float32")
        noisy = corruptions.gaussian_noise(images, 0.4, 5 + 1000)
        np.testing.assert_array_equal(
            saved["noise:0.4"],
            loaded.predict(noisy, verbose=0).argmax(axis=-1))
        with adapted_batchnorm(loaded, noisy, batch_size=8):
            adapted = loaded.predict(noisy, verbose=0).argmax(axis=-1)
        np.testing.assert_array_equal(saved["adapted:noise:0.4"], adapted)
        with np.load(os.path.join(folder, "confusion.npz")) as data:
            matrix = data["adapted:noise:0.4"]
        self.assertEqual(matrix.sum(axis=1).tolist(),
                         np.bincount(labels, minlength=10).tolist())
        self.assertAllClose(np.trace(matrix) / len(labels),
                            record["adapted"]["accuracy"]["noise:0.4"])

    def test_evaluate_command_flags(self):
        digits, labels = synthetic_digits(12, seed=1)
        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(10, seed=0), (digits, labels))
        path = os.path.join(self.get_temp_dir(), "model.keras")
        CNNBaseline("mnist", stem_normalization="group").save(path)
        folder = os.path.join(self.get_temp_dir(), "out")
        arguments = ["evaluate", "--model-path", path, "--data-dir",
                     data_dir, "--noise", "0.2", "--adapt-batchnorm",
                     "--predictions-dir", folder]
        with contextlib.redirect_stdout(io.StringIO()) as stdout:
            self.assertEqual(cli.main(arguments), 0)
        self.assertIn('"batchnorm_layers": 0', stdout.getvalue())
        saved = predictions.read_predictions(folder)
        # No BatchNorm in a GroupNorm stem: adaptation changes nothing.
        np.testing.assert_array_equal(saved["adapted:noise:0.2"],
                                      saved["noise:0.2"])
        before = _file_digest(os.path.join(folder, "predictions.npz"))
        for flags, message in (
                (arguments[1:], "already holds"),
                (arguments[1:5] + ["--adapt-batchnorm"], "add a corruption")):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                self.assertEqual(cli.main(["evaluate", *flags]), 2)
            self.assertIn(message, stderr.getvalue())
        self.assertEqual(
            _file_digest(os.path.join(folder, "predictions.npz")), before)
