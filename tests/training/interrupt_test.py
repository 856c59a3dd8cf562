"""Ctrl-C (a real SIGINT) in `keras-caps train`: one line saying what was
kept and how to resume, exit 130, the folder's lock free, and the same
command resumes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from keras_caps import training
from keras_caps.runs.run_lock import RunLock
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _ctrl_c_as_a_terminal_gives_it():
    """Run in the child before `exec`: SIGINT back to its default action.
    A suite started in the background by a non-interactive shell (`nohup
    ... &`) inherits SIGINT ignored, and Python then never raises
    `KeyboardInterrupt`; this test sends it as a terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.single_backend
def test_ctrl_c_keeps_the_training_and_the_same_command_resumes(tmp_path):
    # 108 training examples (holdout): 6 steps of 16 per epoch.
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(120, seed=0),
                                 synthetic_digits(16, seed=1))
    output_dir = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_caps.cli", "train", "--data-dir",
         data_dir, "--output-dir", str(output_dir), "--epochs", "3",
         "--batch-size", "16", "--backup-frequency", "2",
         "--no-reconstruction"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=_ctrl_c_as_a_terminal_gives_it)
    metadata = output_dir / "backup" / "training_metadata.json"
    deadline = time.time() + 300
    try:
        while not metadata.exists():
            if process.poll() is not None or time.time() > deadline:
                pytest.fail("no backup before the end: "
                            + process.stderr.read()[-3000:])
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = [line for line in stderr.splitlines()
             if line.startswith("keras-caps train:")]
    assert len(lines) == 1, stderr[-3000:]
    backup = str(output_dir / "backup")
    assert lines[0].startswith("keras-caps train: interrupted: kept the "
                               f"training so far in {backup!r}")
    assert lines[0].endswith("Rerun the same command to resume where it "
                             "stopped.")
    with RunLock(str(output_dir)):  # Released: taken at once.
        pass

    state = json.loads(metadata.read_text())
    done = state["epoch"] * 6 + state["steps_done_in_epoch"]
    assert 0 < done < 3 * 6
    record = training.train(
        output_dir=str(output_dir), data_dir=data_dir, epochs=3,
        batch_size=16, backup_frequency=2, reconstruction=False, verbose=0)
    assert record["train_steps_this_run"] == 3 * 6 - done
    assert record["train_steps_total"] == 3 * 6


def test_the_interrupt_line_says_what_the_folder_holds(tmp_path):
    from keras_caps.cli import build_parser

    output_dir = tmp_path / "run"
    args = build_parser().parse_args(["train", "--output-dir",
                                      str(output_dir)])
    assert args.on_interrupt(args) == "nothing was saved."
    output_dir.mkdir()
    (output_dir / "run.json").write_text(
        json.dumps({"settings": {}, "progress": {}}))
    assert args.on_interrupt(args).startswith("no training was saved yet")
    (output_dir / "checkpoints").mkdir()
    (output_dir / "checkpoints" / "best.keras").write_bytes(b"model")
    assert args.on_interrupt(args).startswith(
        "kept the best model so far in ")
    (output_dir / "run.json").write_text(
        json.dumps({"settings": {}, "progress": {"complete": True}}))
    assert args.on_interrupt(args).endswith("was already complete; it is "
                                            "intact.")
