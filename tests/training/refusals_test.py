"""`keras-caps train` refuses what it cannot finish before it writes
anything, and rewrites a complete run's unreadable metrics.json."""

import json
import os
import subprocess
import sys

import keras
import pytest

from keras_caps import cli
from keras_caps import training
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _tiny_mnist(folder):
    return write_idx_dataset(folder, synthetic_digits(40, seed=0),
                             synthetic_digits(8, seed=1))


def test_a_refused_option_leaves_the_folder_unclaimed(tmp_path, capsys,
                                                      monkeypatch):
    data_dir = _tiny_mnist(str(tmp_path / "mnist"))
    output_dir = tmp_path / "run"
    argv = ["train", "--model", "cnn", "--data-dir", data_dir,
            "--output-dir", str(output_dir), "--epochs", "1",
            "--steps-per-epoch", "1", "--batch-size", "8"]
    assert cli.main(argv + ["--routing-temperature", "2"]) == 2
    error = capsys.readouterr().err
    assert "'cnn' has no router" in error
    assert "--routing-temperature" in error
    assert not output_dir.exists() or os.listdir(output_dir) == []
    # The corrected command runs, without --fresh.
    assert cli.main(argv) == 0
    metrics_path = output_dir / "metrics.json"
    written = json.loads(metrics_path.read_text())

    # A complete run's unreadable metrics.json: evaluate names it, and the
    # same train command writes it again from run.json, without training.
    metrics_path.write_text('{"model": "cnn_baseline\x01", ')
    with pytest.raises(ValueError, match="metrics.json.*is unreadable.*"
                       "rerun the `keras-caps train` command"):
        training.evaluate(str(output_dir / "model.keras"), "mnist",
                          data_dir=data_dir)

    def no_training(*args, **kwargs):
        raise AssertionError("trained or tested again")

    monkeypatch.setattr(keras.Model, "fit", no_training)
    monkeypatch.setattr(keras.Model, "evaluate", no_training)
    capsys.readouterr()
    assert cli.main(argv) == 0
    assert json.loads(metrics_path.read_text()) == written


@pytest.mark.single_backend
def test_a_tensorflow_strategy_on_jax_is_refused_before_anything(tmp_path):
    # JAX trains, but has no `tf.distribute` strategy: refused at once.
    data_dir = _tiny_mnist(str(tmp_path / "mnist"))
    output_dir = tmp_path / "run"
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "keras_caps.cli", "train", "--data-dir",
         data_dir, "--output-dir", str(output_dir), "--epochs", "1",
         "--steps-per-epoch", "1", "--batch-size", "8",
         "--no-reconstruction", "--strategy", "multi_worker"], env=env,
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("keras-caps train:")]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "KERAS_BACKEND=tensorflow" in lines[0]
    assert "'jax'" in lines[0]
    assert not output_dir.exists()
