import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_caps import training
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _tiny_mnist(folder, num_train=200, num_test=40):
    return write_idx_dataset(folder, synthetic_digits(num_train, seed=0),
                             synthetic_digits(num_test, seed=1))


def _history_epochs(output_dir):
    with open(os.path.join(output_dir, "history.csv")) as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


class TrainTest(TestCase):
    def test_train_writes_everything_labelled(self):
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"))
        output_dir = os.path.join(self.get_temp_dir(), "run")
        record = training.train(
            "efficient_capsnet", "mnist", output_dir=output_dir, epochs=2,
            batch_size=16, data_dir=data_dir, verbose=0)
        for name in ("model.keras", "metrics.json", "history.csv",
                     "checkpoints/best.keras", "export/saved_model.pb"):
            self.assertTrue(os.path.exists(os.path.join(output_dir, name)),
                            name)
        self.assertFalse(os.path.exists(os.path.join(output_dir, "backup")))
        self.assertEqual(_history_epochs(output_dir), [0, 1])
        with open(os.path.join(output_dir, "metrics.json")) as file:
            written = json.load(file)
        self.assertEqual(written, json.loads(json.dumps(record)))
        self.assertEqual(record["monitor"], "val_length_accuracy")
        self.assertIn(record["selected_epoch"], (1, 2))
        self.assertEqual(record["protocol"],
                         "holdout (model selected on 10% of the training "
                         "data)")
        self.assertEqual(record["epochs"], 2)
        self.assertIn("CPU", record["hardware"])
        self.assertIn("length_accuracy", record["test"])
        leftovers = [name for name in os.listdir(output_dir)
                     if name.startswith(".")]
        self.assertEqual(leftovers, [])
        # The saved model is the selected (best-on-validation) one.
        model = keras.saving.load_model(os.path.join(output_dir,
                                                     "model.keras"))
        best = keras.saving.load_model(
            os.path.join(output_dir, "checkpoints", "best.keras"))
        for a, b in zip(model.weights, best.weights):
            self.assertAllClose(a, b)

    @pytest.mark.large
    def test_annealed_run_logs_and_keeps_its_temperature(self):
        # End to end (about 25 s on 2 cores); the callback's own tests and
        # `test_temperature_scheduler_comes_before_the_logs` cover it fast.
        data_dir = _tiny_mnist(os.path.join(self.get_temp_dir(), "mnist"),
                               num_train=120, num_test=16)
        output_dir = os.path.join(self.get_temp_dir(), "annealed")
        record = training.train(
            "efficient_capsnet", "mnist", output_dir=output_dir, epochs=2,
            steps_per_epoch=2, batch_size=8, data_dir=data_dir, verbose=0,
            routing_temperature=4.0, temperature_decay=0.5,
            min_temperature=0.5)
        self.assertEqual(record["routing_temperature"],
                         {"initial_temperature": 4.0, "decay_rate": 0.5,
                          "minimum_temperature": 0.5})
        # Each epoch's row: the temperature of its last step (1, then 3).
        with open(os.path.join(output_dir, "history.csv")) as file:
            logged = [float(row["routing_temperature"])
                      for row in csv.DictReader(file)]
        expected = [4.0 * np.exp(-0.5 * 1), 4.0 * np.exp(-0.5 * 3)]
        self.assertAllClose(logged, expected, rtol=1e-6)
        # The saved (selected) model keeps its epoch's temperature.
        model = keras.saving.load_model(os.path.join(output_dir,
                                                     "model.keras"))
        temperature = model.get_layer("digit_caps").temperature
        self.assertAllClose(
            temperature, expected[record["selected_epoch"] - 1], rtol=1e-6)

    def test_temperature_scheduler_comes_before_the_logs(self):
        from keras_caps.callbacks import RoutingTemperatureScheduler
        from keras_caps.training.best_checkpoint import BestCheckpoint
        from keras_caps.training.recipe_callbacks import _run_callbacks
        from keras_caps.training.resumable_backup import ResumableBackup

        folder = self.get_temp_dir()
        config = {"initial_temperature": 4.0, "decay_rate": 0.5,
                  "minimum_temperature": 0.5}
        backup = ResumableBackup(os.path.join(folder, "backup"), 10)
        callbacks = _run_callbacks(
            folder, BestCheckpoint(os.path.join(folder, "best.keras")),
            backup, None, routing_temperature=config).in_call_order(0)
        kinds = [type(callback) for callback in callbacks]
        scheduler = callbacks[kinds.index(RoutingTemperatureScheduler)]
        self.assertEqual(scheduler.schedule(3), 4.0 * np.exp(-1.5))
        self.assertLess(kinds.index(RoutingTemperatureScheduler),
                        kinds.index(keras.callbacks.CSVLogger))
        self.assertLess(kinds.index(RoutingTemperatureScheduler),
                        kinds.index(keras.callbacks.TensorBoard))
        self.assertNotIn(RoutingTemperatureScheduler,
                         [type(callback) for callback in _run_callbacks(
                             folder, BestCheckpoint(folder + "/b.keras"),
                             backup, None).in_call_order(0)])
        # The backup comes last: an epoch's backup follows its logs.
        self.assertIs(callbacks[-1], backup)
        with self.assertRaisesRegex(ValueError,
                                    "`min_temperature`.*at most"):
            training.train(output_dir="unused", routing_temperature=0.5,
                           min_temperature=0.8)

    def test_bad_names(self):
        with self.assertRaisesRegex(ValueError, "Unknown `dataset`.*cifar"):
            training.train(dataset="cifar", output_dir="unused")
        with self.assertRaisesRegex(ValueError, "Unknown `precision`"):
            training.train(precision="float8", output_dir="unused")
        with self.assertRaisesRegex(ValueError, "Unknown `validation`"):
            training.train(validation="train", output_dir="unused")


def test_command_without_data_fails_fast(tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_CAPS_DATA_DIR", raising=False)
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "no_tfds"))
    # Offline on any machine: requests go through a proxy port nobody
    # listens on, so the default download fails as without network.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    start = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "keras_caps.cli", "train", "--dataset",
         "mnist", "--output-dir", str(tmp_path / "run")],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--data-dir" in result.stderr
    assert "KERAS_CAPS_DATA_DIR" in result.stderr
    assert "cannot download it from this machine" in result.stderr
    assert time.time() - start < 60
    assert not (tmp_path / "run" / "model.keras").exists()


@pytest.mark.skipif(not os.environ.get("KERAS_CAPS_DATA_DIR"),
                    reason="needs the real MNIST files in KERAS_CAPS_DATA_DIR")
def test_short_real_mnist_run_reaches_97_percent(tmp_path):
    """CI's accuracy check: a few minutes of training on real MNIST; the
    trained model then checks int8 against float32 on real test digits
    (no second training)."""
    record = training.train(
        "efficient_capsnet", "mnist", output_dir=str(tmp_path / "run"),
        epochs=1, batch_size=32, steps_per_epoch=1000, verbose=0)
    assert record["test"]["length_accuracy"] >= 0.97, record
    assert np.isfinite(record["test"]["loss"])
    _check_int8_keeps_the_accuracy(str(tmp_path / "run" / "model.keras"),
                                   str(tmp_path / "int8"))


def _check_int8_keeps_the_accuracy(model_path, folder):
    """int8 weights (`quantize_int8`, in Keras) and, on TensorFlow, a
    LiteRT export with 8-bit weights and activations calibrated on 200
    training images keep the float model's accuracy on 2,000 real test
    digits within 0.2 points (4 digits), the target of Q7-CapsNets."""
    from keras_caps.applications import inference_model
    from keras_caps.datasets import idx
    from keras_caps.inference import quantize_int8

    images, labels = idx.read_idx_dataset(os.path.join(
        os.environ["KERAS_CAPS_DATA_DIR"], "mnist"))["test"]
    images, labels = images[:2000, ..., None].astype("float32"), labels[:2000]

    def accuracy(scores):
        return float(np.mean(np.argmax(scores, -1) == labels))

    served = inference_model(keras.saving.load_model(model_path))
    reference = accuracy(served.predict(images, verbose=0))
    quantized = inference_model(keras.saving.load_model(model_path))
    assert "digit_caps" in quantize_int8(quantized)
    assert abs(accuracy(quantized.predict(images, verbose=0))
               - reference) <= 0.002
    if keras.backend.backend() != "tensorflow":
        return
    pytest.importorskip("ai_edge_litert")
    from keras_caps.export import export_inference_model
    from keras_caps.inference import ExportedClassifier
    from keras_caps.training.calibration_sample import calibration_images

    export_inference_model(
        keras.saving.load_model(model_path), folder, format="litert",
        quantize="int8", representative_images=calibration_images(
            model_path, (28, 28, 1), 200))
    classifier = ExportedClassifier(folder)
    assert abs(accuracy(classifier(images)["length"]) - reference) <= 0.002


def test_reconstruction_defaults_to_the_model_and_rejects_a_missing_decoder():
    with pytest.raises(ValueError, match="has no reconstruction decoder"):
        training.train("vector_routing_capsnet", "mnist",
                       output_dir="unused", reconstruction=True)


def test_multi_mnist_selects_on_the_official_per_digit_accuracy():
    from keras_caps.training.best_checkpoint import resolve_monitor

    logs = {"val_length_exact_match_accuracy": 0.5,
            "val_length_multi_digit_accuracy": 0.7, "loss": 1.0}
    assert resolve_monitor("auto", logs) == "val_length_multi_digit_accuracy"


def test_train_refuses_a_foreign_export_up_front(tmp_path):
    other = tmp_path / "other"
    (other / "export").mkdir(parents=True)
    (other / "export" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="never deletes"):
        training.train(output_dir=str(other), epochs=1)
    assert os.listdir(other / "export") == ["notes.txt"]
    assert sorted(os.listdir(other)) == ["export"]


# Runs the command with `keras.Model.export` replaced by the real export
# followed by a SIGKILL of the process: killed at the last stage, after
# training, testing and saving model.keras, with the SavedModel half-placed.
_KILLED_DURING_EXPORT = """
import os, signal, sys
from keras_caps import cli
from keras_caps.export import saved_model

write = saved_model._write_saved_model

def write_then_die(*args, **kwargs):  # The SavedModel, before its move.
    write(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

saved_model._write_saved_model = write_then_die
sys.exit(cli.main(sys.argv[1:]))
"""


def test_killed_during_export_a_rerun_finishes_without_training(
        tmp_path, monkeypatch, caplog):
    data_dir = _tiny_mnist(str(tmp_path / "mnist"), num_train=100,
                           num_test=20)
    output_dir = tmp_path / "run"
    arguments = dict(epochs=2, batch_size=16, steps_per_epoch=2,
                     backup_frequency=1)
    worktree = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=worktree)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_DURING_EXPORT, "train", "--dataset",
         "mnist", "--data-dir", data_dir, "--output-dir", str(output_dir),
         "--epochs", "2", "--batch-size", "16", "--steps-per-epoch", "2",
         "--backup-frequency", "1"], env=env, capture_output=True,
        text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert _history_epochs(output_dir) == [0, 1]
    assert (output_dir / "backup").exists()  # Kept until the end.
    assert not (output_dir / "metrics.json").exists()
    assert not (output_dir / "export").exists()
    assert [name for name in os.listdir(output_dir)
            if name.startswith(".export-")]  # The staged SavedModel.
    model_time = (output_dir / "model.keras").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    # The same command again (in this process, to save a TensorFlow
    # start): it must neither train nor test again.
    monkeypatch.setattr(keras.Model, "fit", no_training)
    monkeypatch.setattr(keras.Model, "evaluate", no_training)
    caplog.set_level("INFO")
    record = training.train(output_dir=str(output_dir), data_dir=data_dir,
                            **arguments)
    assert "writing what is missing" in caplog.text
    assert _history_epochs(output_dir) == [0, 1]
    assert (output_dir / "model.keras").stat().st_mtime_ns == model_time
    assert (output_dir / "export" / "saved_model.pb").exists()
    written = json.loads((output_dir / "metrics.json").read_text())
    assert written == json.loads(json.dumps(record))
    assert record["epochs"] == 2 and "length_accuracy" in record["test"]
    assert not (output_dir / "backup").exists()
    assert sorted(name for name in os.listdir(output_dir)
                  if name.startswith(".")) == []  # The staged export too.
