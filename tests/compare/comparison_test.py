import contextlib
import csv
import hashlib
import io
import json
import os
import shutil
from unittest import mock

import keras
import numpy as np
import tensorflow_datasets as tfds

from keras_caps import cli
from keras_caps.compare import comparison
from keras_caps.datasets import idx
from keras_caps.evaluation import corruptions
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison

_CORRUPTIONS = {"noise": [0.3], "occlusion": [10]}


def _tiny_mnist(folder, seed=0):
    return write_idx_dataset(folder, synthetic_digits(120, seed=seed),
                             synthetic_digits(30, seed=seed + 1))


def _independent_accuracy(model, images, labels):
    """Accuracy of a loaded model, without keras_caps.evaluation."""
    if isinstance(model.input, dict):  # decoder models: images and labels
        inputs = {"image": images,
                  "label": np.zeros((len(images), 10), "float32")}
        scores = model.predict(inputs, verbose=0)["length"]
    else:
        scores = model.predict(images, verbose=0)
    return float(np.mean(scores.argmax(axis=-1) == labels))


class CompareTest(TestCase):
    def test_end_to_end_resume_and_refusal(self):
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        # In this process, to keep the test short; `test_compare_command`
        # runs the default, a process per model.
        kwargs = dict(output_dir=output_dir, seeds=[0, 1], epochs=1,
                      steps_per_epoch=2, batch_size=16, data_dir=data_dir,
                      corruptions=_CORRUPTIONS, evaluation_seed=7,
                      isolation="session")
        results = run_comparison(["self_attention", "cnn"], "mnist",
                                     **kwargs)
        for name in ("compare.json", "results.md", "results.csv",
                     "results.json", "accuracy_vs_severity.png"):
            self.assertTrue(os.path.exists(os.path.join(output_dir, name)),
                            name)
        # The table's numbers are the saved models' accuracies, computed
        # here from the raw test digits and the corruption functions.
        test_images, test_labels = synthetic_digits(30, seed=1)
        images = test_images[..., None].astype("float32")
        with open(os.path.join(output_dir, "results.csv")) as file:
            rows = {row["router"]: row for row in csv.DictReader(file)}
        self.assertEqual(sorted(rows), ["cnn", "self_attention"])
        for router in ("self_attention", "cnn"):
            clean, noisy, occluded = [], [], []
            for seed in (0, 1):
                model = keras.saving.load_model(os.path.join(
                    comparison.run_dir(output_dir, router, seed),
                    "model.keras"))
                clean.append(_independent_accuracy(model, images,
                                                   test_labels))
                noisy.append(_independent_accuracy(
                    model, corruptions.gaussian_noise(images, 0.3, 7 + 1000),
                    test_labels))
                occluded.append(_independent_accuracy(
                    model, corruptions.occlusion(images, 10, 7 + 3000),
                    test_labels))
            row = rows[router]
            for key, values in (("clean", clean), ("noise:0.3", noisy),
                                ("occlusion:10", occluded)):
                self.assertAllClose(float(row[f"{key}_mean"]),
                                    np.mean(values), atol=1e-9)
                self.assertAllClose(float(row[f"{key}_std"]),
                                    np.std(values, ddof=1), atol=1e-9)
            self.assertGreater(int(row["trainable_parameters"]), 160000)
            self.assertGreater(float(row["train_ms_per_step"]), 0)
        with open(os.path.join(output_dir, "results.md")) as file:
            table = file.read()
        self.assertIn("| self_attention (reference) | 161,824 |", table)
        # Two seeds: a 95 % Student-t interval, and cnn tested against
        # the reference on every column (#22).
        self.assertIn("t-test p", table)
        self.assertEqual(list(results["statistics"]["models"]), ["cnn"])
        self.assertIn("2 seeds [0, 1], 1 epochs of 2 steps", table)
        self.assertTrue(all(run["trained_now"] for run in results["models"]))

        # Resumed: nothing is trained again, the table is the same.
        model_path = os.path.join(comparison.run_dir(output_dir, "cnn", 1),
                                  "model.keras")
        modified = os.path.getmtime(model_path)
        again = run_comparison(["self_attention", "cnn"], "mnist",
                                   **kwargs)
        self.assertFalse(any(run["trained_now"] for run in again["models"]))
        self.assertEqual(os.path.getmtime(model_path), modified)
        self.assertEqual(again["routers"]["cnn"]["accuracy"],
                         results["routers"]["cnn"]["accuracy"])
        # Another set of routers with the same recipe: reported from the
        # finished models, none trained again.
        subset = run_comparison(["cnn"], "mnist", **kwargs)
        self.assertEqual(list(subset["routers"]), ["cnn"])
        self.assertFalse(any(run["trained_now"] for run in subset["models"]))
        self.assertEqual(os.path.getmtime(model_path), modified)
        run_comparison(["self_attention", "cnn"], "mnist", **kwargs)

        # Other settings in the same folder: refused, nothing overwritten.
        with open(os.path.join(output_dir, "compare.json")) as file:
            settings = file.read()
        with self.assertRaisesRegex(ValueError, "other settings.*seeds"):
            run_comparison(["self_attention", "cnn"], "mnist",
                               **{**kwargs, "seeds": [0, 1, 2]})
        with open(os.path.join(output_dir, "compare.json")) as file:
            self.assertEqual(file.read(), settings)
        self.assertFalse(os.path.exists(
            comparison.run_dir(output_dir, "self_attention", 2)))
        self.assertEqual(json.loads(settings)["routers"],
                         ["self_attention", "cnn"])

        self._check_speed(output_dir, results, kwargs)
        self._check_unreadable_records(output_dir, kwargs)
        self._check_data(output_dir, data_dir, results, kwargs)

    def _check_speed(self, output_dir, results, kwargs):
        """ms/step: this run's seconds over this run's steps (#27, 5)."""
        def metrics_path(router, seed):
            return os.path.join(comparison.run_dir(output_dir, router, seed),
                                "metrics.json")

        def records(router):
            return [read_json(metrics_path(router, seed)) for seed in (0, 1)]

        def read_json(path):
            with open(path) as file:
                return json.load(file)

        for router in ("self_attention", "cnn"):
            measured = records(router)
            self.assertEqual([m["train_steps_this_run"] for m in measured],
                             [2, 2])
            self.assertAllClose(
                results["routers"][router]["train_ms_per_step"],
                np.mean([1000 * m["train_seconds_this_run"] / 2
                         for m in measured]))
        # A model resumed for its last 3 steps in 4.5 s; a record without
        # the steps (an earlier keras_caps): no number is invented.
        for router, seed, seconds, steps in (
                ("self_attention", 0, 4.5, 3), ("self_attention", 1, 2.0, 2),
                ("cnn", 0, 3.0, 2), ("cnn", 1, 9.0, None)):
            record = read_json(metrics_path(router, seed))
            record["train_seconds_this_run"] = seconds
            del record["train_steps_this_run"]
            if steps is not None:
                record["train_steps_this_run"] = steps
            with open(metrics_path(router, seed), "w") as file:
                json.dump(record, file)
        again = run_comparison(["self_attention", "cnn"], "mnist",
                                   **kwargs)
        self.assertAllClose(again["routers"]["self_attention"]
                            ["train_ms_per_step"], (1500 + 1000) / 2)
        self.assertEqual(again["routers"]["cnn"]["train_ms_per_step"], 1500)
        self.assertEqual(again["routers"]["cnn"]["speed_seeds"], [0])
        with open(os.path.join(output_dir, "results.md")) as file:
            table = file.read()
        self.assertIn("| cnn | 161,834 | 1500.0* |", table)
        self.assertIn("* : the mean over the seeds that record them", table)
        record = read_json(metrics_path("cnn", 0))
        del record["train_steps_this_run"]
        with open(metrics_path("cnn", 0), "w") as file:
            json.dump(record, file)
        again = run_comparison(["self_attention", "cnn"], "mnist",
                                   **kwargs)
        self.assertIsNone(again["routers"]["cnn"]["train_ms_per_step"])
        with open(os.path.join(output_dir, "results.md")) as file:
            self.assertIn("| cnn | 161,834 | n/a |", file.read())
        with open(os.path.join(output_dir, "results.csv")) as file:
            rows = {row["router"]: row for row in csv.DictReader(file)}
        self.assertEqual(rows["cnn"]["train_ms_per_step"], "nan")
        with open(os.path.join(output_dir, "results.json")) as file:
            self.assertIsNone(
                json.load(file)["routers"]["cnn"]["train_ms_per_step"])

    def _check_unreadable_records(self, output_dir, kwargs):
        """Broken records name their file (#27, defect 10)."""
        def corrupt(path):
            with open(path, "rb") as file:
                content = file.read()
            with open(path, "w") as file:
                file.write('{"settings": \x01')
            return content

        # robustness.json is compare's own, derived data: computed again.
        folder = comparison.run_dir(output_dir, "cnn", 0)
        evaluation = os.path.join(folder, "robustness.json")
        before = run_comparison(["cnn"], "mnist", **kwargs)
        corrupt(evaluation)
        with self.assertLogs(level="WARNING") as logs:
            after = run_comparison(["cnn"], "mnist", **kwargs)
        self.assertIn(repr(evaluation), "\n".join(logs.output))
        self.assertEqual(after["routers"]["cnn"]["accuracy"],
                         before["routers"]["cnn"]["accuracy"])
        with open(evaluation) as file:
            self.assertIn("clean", json.load(file))
        # A model's metrics.json and compare.json: one error naming the
        # file and what to do; nothing overwritten.
        for path, advice in (
                (os.path.join(folder, "metrics.json"),
                 "move the model's folder"),
                (os.path.join(output_dir, "compare.json"),
                 "use another --output-dir")):
            content = corrupt(path)
            with self.assertRaisesRegex(ValueError, "unreadable") as raised:
                run_comparison(["cnn"], "mnist", **kwargs)
            self.assertIn(repr(path), str(raised.exception))
            self.assertIn(advice, str(raised.exception))
            self.assertNotIn("\n", str(raised.exception))
            with open(path) as file:
                self.assertEqual(file.read(), '{"settings": \x01')
            with open(path, "wb") as file:
                file.write(content)

    def _check_data(self, output_dir, data_dir, results, kwargs):
        """The data is recorded and other data refused (#27, defect 3)."""
        with open(os.path.join(output_dir, "compare.json")) as file:
            settings = file.read()
        data = json.loads(settings)["data"]
        self.assertNotIn("data_dir", data)  # The content, not the path.
        self.assertEqual(sorted(data["files"]),
                         sorted(name for pair in idx.IDX_FILES.values()
                                for name in pair))
        for name, record in data["files"].items():
            with open(os.path.join(data_dir, name), "rb") as file:
                content = file.read()
            self.assertEqual(record, {
                "bytes": len(content),
                "sha256": hashlib.sha256(content).hexdigest()})
        self.assertEqual(results["settings"]["data"], data)
        for run in results["models"]:
            self.assertEqual(run["evaluation"]["settings"]["data"], data)

        # Other data, one more router: refused before anything trains.
        other = _tiny_mnist(os.path.join(self.get_temp_dir(), "other"),
                            seed=5)
        with self.assertRaisesRegex(
                ValueError, r"other settings or data \(differing: "
                r"data: t10k-images-idx3-ubyte.gz: \d+ bytes, SHA-256 "
                r"[0-9a-f]{12}\.\.\. then; \d+ bytes, SHA-256 "
                r"[0-9a-f]{12}\.\.\. now; "):
            run_comparison(["self_attention", "cnn", "dynamic"],
                               "mnist", **{**kwargs, "data_dir": other})
        # The same files in another folder are the same data: resumed,
        # nothing trained or evaluated again.
        moved = os.path.join(self.get_temp_dir(), "moved")
        shutil.copytree(data_dir, moved)
        with mock.patch.object(comparison, "train_and_evaluate") as trained:
            again = run_comparison(["cnn"], "mnist",
                                       **{**kwargs, "data_dir": moved})
        trained.assert_not_called()
        self.assertEqual(again["routers"]["cnn"]["accuracy"],
                         results["routers"]["cnn"]["accuracy"])
        # The same folder with other test files: refused too.
        _tiny_mnist(data_dir, seed=5)
        with self.assertRaisesRegex(
                ValueError, r"data: t10k-images-idx3-ubyte.gz: \d+ bytes, "
                r"SHA-256 [0-9a-f]{12}\.\.\. then"):
            run_comparison(["self_attention", "cnn", "dynamic"],
                               "mnist", **kwargs)
        self.assertFalse(os.path.exists(
            comparison.run_dir(output_dir, "dynamic", 0)))
        with open(os.path.join(output_dir, "compare.json")) as file:
            self.assertEqual(file.read(), settings)

        # A comparison from before the data was recorded: refused.
        legacy = os.path.join(self.get_temp_dir(), "legacy")
        shutil.copytree(output_dir, legacy)
        with open(os.path.join(legacy, "compare.json"), "w") as file:
            json.dump({key: value for key, value
                       in json.loads(settings).items() if key != "data"},
                      file)
        with self.assertRaisesRegex(
                ValueError, "earlier keras_caps that did not record"):
            run_comparison(["self_attention", "cnn"], "mnist",
                               **{**kwargs, "output_dir": legacy})
        # A comparison that recorded its data by folder path (a development
        # version): refused with what to do, nothing overwritten.
        path_based = {**json.loads(settings), "data": {
            "data_dir": os.path.abspath(data_dir), "files": data["files"]}}
        with open(os.path.join(legacy, "compare.json"), "w") as file:
            json.dump(path_based, file)
        with self.assertRaisesRegex(
                ValueError, "records its data by folder path.*another "
                "--output-dir"):
            run_comparison(["self_attention", "cnn"], "mnist",
                               **{**kwargs, "output_dir": legacy})
        with open(os.path.join(legacy, "compare.json")) as file:
            self.assertEqual(json.load(file), path_based)

    def test_bad_input(self):
        output_dir = os.path.join(self.get_temp_dir(), "unused")
        cases = [
            (dict(routers=["dynamic", "no_such_router"]), ValueError,
             r"Unknown routers \['no_such_router'\]"),
            (dict(routers=["dynamic", "dynamic"]), ValueError,
             r"Duplicate routers \['dynamic'\]"),
            (dict(routers=[]), ValueError, "at least one router"),
            (dict(seeds=[]), ValueError, "at least one seed"),
            (dict(seeds=[1, 1]), ValueError, "Duplicate seeds"),
            (dict(corruptions={"noise": [1.5]}), ValueError,
             r"noise severity, expected a number in \[0, 1\]"),
            (dict(corruptions={"occlusion": [29]}), ValueError,
             r"occlusion size.*\[0, 28\]"),
            (dict(corruptions={"affine": True}), ValueError,
             "affine corruption does not apply to 'mnist'.*mnist_canvas"),
            (dict(dataset="smallnorb", corruptions={"affine": True}),
             ValueError, "stereo pairs"),
            (dict(dataset="multi_mnist"), ValueError,
             "give `partners_per_digit`"),
            (dict(corruptions={"blur": [1]}), ValueError,
             r"Unknown corruptions \['blur'\]"),
            (dict(reference="cnn"), ValueError,
             r"invalid value for `reference`.*\['dynamic'\].*"
             r"reference='cnn'"),
        ]
        for kwargs, error, message in cases:
            kwargs = {"routers": ["dynamic"], "dataset": "mnist", **kwargs}
            with self.assertRaisesRegex(error, message):
                run_comparison(output_dir=output_dir, **kwargs)
        self.assertFalse(os.path.exists(output_dir))

    def test_records_a_tfds_dataset_by_name_and_version(self):
        # No data folder: the TFDS dataset (not prepared here, downloads
        # off), recorded by name and version before it is read.
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        tfds_dir = os.path.join(self.get_temp_dir(), "tfds")
        os.makedirs(tfds_dir)
        kwargs = dict(output_dir=output_dir, seeds=[0], epochs=1,
                      steps_per_epoch=1, batch_size=8, reconstruction=False,
                      isolation="session", download=False)
        environment = {key: value for key, value in os.environ.items()
                       if key != "KERAS_CAPS_DATA_DIR"}
        with mock.patch.dict(os.environ, {**environment,
                                          "TFDS_DATA_DIR": tfds_dir},
                             clear=True):
            # Refused before compare.json claims the folder.
            with self.assertRaisesRegex(ValueError, "not prepared.*"
                                        "Downloads are off"):
                run_comparison(["cnn"], "mnist", **kwargs)
            self.assertFalse(os.path.exists(output_dir))
            # A dataset that looks prepared is recorded, then found
            # missing when the first model reads it.
            with mock.patch("keras_caps.compare.comparison_settings."
                            "check_tfds_prepared"), self.assertRaisesRegex(
                                ValueError, "not prepared"):
                run_comparison(["cnn"], "mnist", **kwargs)
        with open(os.path.join(output_dir, "compare.json")) as file:
            data = json.load(file)["data"]
        self.assertEqual(data, {"tfds": {
            "name": "mnist",
            "version": str(tfds.builder_cls("mnist").VERSION),
            "data_dir": os.path.abspath(tfds_dir)}})
        # The same comparison from IDX files: other data, refused.
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        with self.assertRaisesRegex(
                ValueError, r"data: TFDS data then, IDX files of a data "
                r"folder now"):
            run_comparison(["cnn"], "mnist",
                               **{**kwargs, "data_dir": data_dir})

    def test_refuses_a_backend_train_cannot_finish_on(self):
        # Before compare.json is written, not in each model's training.
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        with mock.patch.object(keras.backend, "backend",
                               return_value="numpy"):
            with self.assertRaisesRegex(
                    ValueError, "`keras-caps compare`.* trains on the "
                    "TensorFlow, JAX or PyTorch backend.*"
                    "KERAS_BACKEND='numpy'"):
                run_comparison(["cnn"], "mnist", output_dir=output_dir,
                                   data_dir=data_dir, isolation="session")
        self.assertFalse(os.path.exists(output_dir))

    def test_refuses_a_folder_that_is_not_a_comparison(self):
        output_dir = os.path.join(self.get_temp_dir(), "busy")
        os.makedirs(output_dir)
        with open(os.path.join(output_dir, "notes.txt"), "w") as file:
            file.write("mine")
        with self.assertRaisesRegex(ValueError, "not a comparison folder"):
            run_comparison(["cnn"], output_dir=output_dir)
        self.assertEqual(os.listdir(output_dir), ["notes.txt"])


class CompareCommandTest(TestCase):
    def test_compare_command(self):
        # The command line, each model in its own process (the default).
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = cli.main(["compare", "--routers", "cnn", "--seeds", "3",
                             "--epochs", "1", "--steps-per-epoch", "2",
                             "--data-dir", data_dir, "--output-dir",
                             output_dir, "--pixel-corruption", "0.25"])
        self.assertEqual(code, 0)
        self.assertIn("cnn: 161,834 trainable parameters", stdout.getvalue())
        with open(os.path.join(output_dir, "results.json")) as file:
            results = json.load(file)
        (run,) = results["models"]
        self.assertTrue(run["trained_now"])
        images, labels = synthetic_digits(30, seed=1)
        model = keras.saving.load_model(run["model_path"])
        pixels = corruptions.pixel_corruption(
            images[..., None].astype("float32"), 0.25, 1234 + 2000)
        self.assertAllClose(
            results["routers"]["cnn"]["accuracy"]["pixels:0.25"]["mean"],
            _independent_accuracy(model, pixels, labels))

    def test_bad_input_is_a_clear_error(self):
        output_dir = os.path.join(self.get_temp_dir(), "unused")
        for flags, message in (
                (["--routers", "dynamic,dynamic"], "Duplicate routers"),
                (["--routers", "dynamic,no_such_router"],
                 r"Unknown routers \['no_such_router'\]"),
                (["--seeds", ","], "at least one seed"),
                (["--routers", "dynamic", "--reference", "cnn"],
                 "invalid value for `reference`"),
                (["--pixel-corruption", "1.2"], r"pixels severity"),
                (["--dataset", "smallnorb", "--affine"], "stereo pairs")):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                code = cli.main(["compare", "--output-dir", output_dir,
                                 *flags])
            self.assertEqual(code, 2, flags)
            self.assertRegex(stderr.getvalue(),
                             "keras-caps compare: error: .*" + message)
        self.assertFalse(os.path.exists(output_dir))
