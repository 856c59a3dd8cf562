"""A run killed (SIGKILL) at an epoch's end or mid-epoch resumes without
repeating a step: the optimizer ends at exactly epochs x steps."""

import csv
import json
import os
import signal
import subprocess
import sys

import pytest

from keras_caps import training
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.testing.killed_runs import KILLED_AFTER_BACKUP


def _history_epochs(output_dir):
    with open(os.path.join(output_dir, "history.csv")) as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


def _train_until_killed(stop, arguments):
    worktree = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=worktree)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_BACKUP, *map(str, stop),
         "train", *arguments], env=env, capture_output=True, text=True,
        timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]


@pytest.mark.single_backend
def test_killed_runs_resume_without_repeating_steps(tmp_path):
    # 120 examples: 108 for training (holdout), 6 steps of 16 per epoch.
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(120, seed=0),
                                 synthetic_digits(16, seed=1))
    output_dir = tmp_path / "run"
    arguments = ["--dataset", "mnist", "--data-dir", data_dir,
                 "--output-dir", str(output_dir), "--epochs", "3",
                 "--batch-size", "16", "--backup-frequency", "4",
                 "--no-reconstruction"]
    metadata = output_dir / "backup" / "training_metadata.json"
    # Killed right after the first epoch's end: its backup (no step count
    # divides the epoch's 6 steps but the first 4) is saved.
    _train_until_killed((1, 0), arguments)
    assert json.loads(metadata.read_text())["epoch"] == 1
    assert _history_epochs(output_dir) == [0]
    # Resumed at the second epoch, then killed mid-way through the third,
    # after 4 of its 6 steps.
    _train_until_killed((2, 4), arguments)
    state = json.loads(metadata.read_text())
    assert (state["epoch"], state["steps_done_in_epoch"]) == (2, 4)
    assert state["iterations"] == 2 * 6 + 4
    assert _history_epochs(output_dir) == [0, 1]

    record = training.train(
        output_dir=str(output_dir), data_dir=data_dir, epochs=3,
        batch_size=16, backup_frequency=4, reconstruction=False, verbose=0)
    # Only the third epoch's 2 remaining steps ran: no step twice.
    assert record["train_steps_per_epoch"] == 6
    assert record["train_steps_this_run"] == 2
    assert record["train_steps_total"] == 3 * 6
    # The speed is this process's: its 2 steps are both warm-up steps, so
    # none is timed (the killed processes' 16 steps are not counted).
    assert (record["steady_ms_per_step"], record["steady_steps"]) == (None, 0)
    assert record["peak_memory_mb"] > 0
    assert _history_epochs(output_dir) == [0, 1, 2]
    assert not (output_dir / "backup").exists()
