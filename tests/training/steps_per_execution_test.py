"""`keras-caps train --steps-per-execution N` trains as N=1 does: on JAX,
runs with N=1 and N=4 (epochs of 6 steps, each ending on a call of 2)
end with the same weights, optimizer steps and validation history, and
a run killed at a backup with N=4 resumes with N=2 for exactly the steps
left, to the same weights; `--input-workers` reaches the NumPy pipeline
without changing the batches the run sees."""

import csv
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import zipfile

import h5py
import numpy as np
import pytest

from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.testing.killed_runs import KILLED_AFTER_BACKUP
from keras_caps.testing.xla_flags import fast_xla_flags

_WORKTREE = pathlib.Path(__file__).resolve().parents[2]
# XLA compiles fast (code speed, not results), as in backends_test.
_FAST_XLA = fast_xla_flags("jax")

# Runs each `keras-caps` command of the JSON list in its first argument.
_COMMANDS = """
import json, sys
from keras_caps import cli
for arguments in json.loads(sys.argv[1]):
    code = cli.main(arguments)
    if code:
        sys.exit(code)
"""


def _run(script, arguments, expect=0):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(_WORKTREE), XLA_FLAGS=_FAST_XLA)
    process = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)], env=env,
        capture_output=True, text=True, timeout=600, cwd=str(_WORKTREE))
    assert process.returncode == expect, process.stderr[-3000:]
    return process


def _weights(model_path):
    """Every array of a `.keras` file's weights, by its path in the file
    (read with h5py, not Keras)."""
    with zipfile.ZipFile(model_path) as archive:
        data = io.BytesIO(archive.read("model.weights.h5"))
    arrays = {}
    with h5py.File(data, "r") as weights:
        weights.visititems(lambda name, item: arrays.__setitem__(
            name, np.asarray(item)) if isinstance(item, h5py.Dataset)
            else None)
    return arrays


def _history(output_dir):
    with open(output_dir / "history.csv") as file:
        return [{key: float(value) for key, value in row.items()}
                for row in csv.DictReader(file)]


def _record(output_dir):
    with open(output_dir / "metrics.json") as file:
        return json.load(file)


@pytest.mark.single_backend
def test_steps_per_execution_trains_as_one_step_per_call(tmp_path):
    # 120 training digits: 108 after the holdout, 6 steps of 16.
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(120, seed=0),
                                 synthetic_digits(16, seed=1))

    def arguments(name, steps_per_execution, *extra):
        return ["train", "--dataset", "mnist", "--data-dir", data_dir,
                "--output-dir", str(tmp_path / name), "--epochs", "2",
                "--batch-size", "16", "--backup-frequency", "2",
                "--no-reconstruction", "--steps-per-execution",
                str(steps_per_execution), *extra]

    _run(_COMMANDS, [json.dumps([
        arguments("one", 1), arguments("four", 4, "--input-workers", "3")])])
    # Killed in the second epoch, after the backup of its first call.
    _run(KILLED_AFTER_BACKUP, [1, 4, *arguments("resumed", 4)],
         expect=-signal.SIGKILL)
    _run(_COMMANDS, [json.dumps([arguments("resumed", 2)])])

    reference = _record(tmp_path / "one")
    assert reference["steps_per_execution"] == 1
    assert reference["train_steps_total"] == 12
    four = _record(tmp_path / "four")
    assert four["steps_per_execution"] == 4
    assert four["train_steps_total"] == four["train_steps_this_run"] == 12
    assert four["epochs_trained"] == 2
    assert four["selected_epoch"] == reference["selected_epoch"]
    expected = _weights(tmp_path / "one" / "model.keras")
    weights = _weights(tmp_path / "four" / "model.keras")
    assert sorted(weights) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(weights[key], value, atol=1e-6,
                                   err_msg=key)
    for row, expected_row in zip(_history(tmp_path / "four"),
                                 _history(tmp_path / "one"), strict=True):
        for key in ("loss", "val_loss", "val_accuracy"):
            np.testing.assert_allclose(row[key], expected_row[key],
                                       rtol=1e-5)
    # The workers reached the NumPy pipeline, and the batches did not
    # change (the weights above).
    assert (four["input_pipeline"], four["input_workers"]) == ("numpy", 3)
    assert (reference["input_pipeline"],
            reference["input_workers"]) == ("numpy", None)
    # Resumed with another N: the 2 steps left of the second epoch, no
    # more, on the batches an uninterrupted run reads there (the NumPy
    # pipeline's epoch is the training epoch's): the same weights.
    resumed = _record(tmp_path / "resumed")
    assert resumed["steps_per_execution"] == 2
    assert resumed["train_steps_total"] == 12
    assert resumed["train_steps_this_run"] == 2
    assert [row["epoch"] for row in _history(tmp_path / "resumed")] == [0, 1]
    weights = _weights(tmp_path / "resumed" / "model.keras")
    for key, value in expected.items():
        np.testing.assert_allclose(weights[key], value, atol=1e-6,
                                   err_msg=key)
