import contextlib
import io
import json
import os

import keras
import numpy as np

from keras_caps import cli
from keras_caps.applications import CNNBaseline
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import evaluate_robustness
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _accuracies(model, images, labels):
    predicted = model.predict(images, verbose=0).argmax(axis=-1)
    per_class = [np.mean(predicted[labels == k] == k)
                 for k in np.unique(labels)]
    return float(np.mean(predicted == labels)), float(np.mean(per_class))


class EvaluateRobustnessTest(TestCase):
    def setUp(self):
        super().setUp()
        self.digits, self.labels = synthetic_digits(24, seed=1)
        self.data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), (self.digits, self.labels))

    def test_canvas_model_with_affine_and_pixels(self):
        model = CNNBaseline("mnist_canvas")
        # Bias the classifier so that an untrained model is right on some
        # digits and wrong on others.
        kernel, bias = model.get_layer("probabilities").get_weights()
        model.get_layer("probabilities").set_weights(
            [kernel, np.linspace(0, 3, 10).astype("float32")])
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        record = evaluate_robustness(
            path, "mnist_canvas", data_dir=self.data_dir, seed=5,
            corruptions={"affine": True, "pixels": [0.5]}, batch_size=8)
        # Independently: the digits centred on the canvas by np.pad.
        canvas = np.pad(self.digits, ((0, 0), (6, 6), (6, 6)))[..., None]
        canvas = canvas.astype("float32")
        accuracy, macro = _accuracies(model, canvas, self.labels)
        self.assertAllClose(record["clean"]["accuracy"], accuracy)
        self.assertAllClose(record["clean"]["macro_accuracy"], macro)
        self.assertEqual(record["clean"]["num_images"], 24)
        self.assertGreater(record["clean"]["images_per_second"], 0)
        affine = corruptions.affine_test_set(
            self.digits[..., None].astype("float32"), 5 + 4000)
        self.assertAllClose(record["affine"],
                            _accuracies(model, affine, self.labels)[0])
        pixels = corruptions.pixel_corruption(canvas, 0.5, 5 + 2000)
        self.assertAllClose(record["pixels"]["0.5"],
                            _accuracies(model, pixels, self.labels)[0])
        self.assertEqual(record["trainable_parameters"], sum(
            int(np.prod(w.shape)) for w in model.trainable_weights))

    def test_evaluate_command_flags(self):
        model = CNNBaseline("mnist", compile=True)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        output = os.path.join(self.get_temp_dir(), "metrics.json")
        code = cli.main(["evaluate", "--model-path", path, "--dataset",
                         "mnist", "--data-dir", self.data_dir, "--noise",
                         "0.1,0.4", "--occlusion", "6", "--corruption-seed",
                         "3", "--output", output])
        self.assertEqual(code, 0)
        with open(output) as file:
            robustness = json.load(file)["robustness"]
        self.assertEqual(sorted(robustness["noise"]), ["0.1", "0.4"])
        images = self.digits[..., None].astype("float32")
        loaded = keras.saving.load_model(path)
        self.assertAllClose(
            robustness["occlusion"]["6"],
            _accuracies(loaded, corruptions.occlusion(images, 6, 3 + 3000),
                        self.labels)[0])

    def test_evaluate_command_bad_corruptions(self):
        model = CNNBaseline("mnist", compile=True)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        for flags, message in (
                (["--noise", "2"], r"noise severity.*\[0, 1\]"),
                (["--affine"], "mnist_canvas")):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                code = cli.main(["evaluate", "--model-path", path,
                                 "--data-dir", self.data_dir, *flags])
            self.assertEqual(code, 2)
            self.assertRegex(stderr.getvalue(), message)
