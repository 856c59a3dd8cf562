"""The one-window GPU recipe's dry run (`benchmarks/jax_gpu_mnist.py
--dry-run`) on JAX, in a process where TensorFlow cannot be imported:
it trains through `keras_caps.training.train` and labels `metrics.json`;
and its flags become `train`'s arguments."""

import json
import math
import os
import pathlib
import runpy
import subprocess
import sys

import pytest

from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.testing.without_tensorflow import REFUSE_TENSORFLOW
from keras_caps.testing.xla_flags import fast_xla_flags

_WORKTREE = pathlib.Path(__file__).resolve().parents[2]
_SCRIPT = _WORKTREE / "benchmarks" / "jax_gpu_mnist.py"

_RUN_SCRIPT = REFUSE_TENSORFLOW + """
import runpy
script = sys.argv[1]
sys.argv = [script, *sys.argv[2:]]
runpy.run_path(script, run_name="__main__")
assert "tensorflow" not in sys.modules or sys.modules["tensorflow"] is None
"""


def _script():
    return runpy.run_path(str(_SCRIPT))


@pytest.mark.single_backend
def test_dry_run_without_tensorflow_writes_a_labelled_record(tmp_path):
    # 200 training digits: 180 after the holdout (11 batches of 16, of
    # which the dry run trains 8 an epoch), 20 held out, 32 test digits.
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(200, seed=0),
                                 synthetic_digits(32, seed=1))
    output_dir = tmp_path / "run"
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(_WORKTREE),
               # XLA compiles fast: code speed, not results.
               XLA_FLAGS=fast_xla_flags("jax"))
    process = subprocess.run(
        [sys.executable, "-c", _RUN_SCRIPT, str(_SCRIPT), "--dry-run",
         "--data-dir", data_dir, "--output-dir", str(output_dir)],
        env=env, capture_output=True, text=True, timeout=300,
        cwd=str(tmp_path))
    assert process.returncode == 0, process.stderr[-3000:]
    with open(output_dir / "metrics.json") as file:
        record = json.load(file)
    assert record["protocol"] == (
        "holdout (model selected on 10% of the training data)")
    assert record["dataset_options"] == {"augment": True,
                                         "augmentation": "efficient_capsnet"}
    assert (record["backend"], record["input_pipeline"]) == ("jax", "numpy")
    assert "tensorflow" not in record["versions"]
    assert (record["epochs"], record["epochs_trained"]) == (2, 2)
    assert record["steps_per_execution"] == 4
    assert record["train_steps_total"] == 16
    assert record["selected_epoch"] in (1, 2)
    assert 0 <= record["best_validation"] <= 1
    accuracy = record["test"]["length_accuracy"]
    assert math.isfinite(accuracy) and 0 <= accuracy <= 1
    assert record["time_budget"] == {"seconds": 480.0, "ran_out": False,
                                     "stopped_after_epoch": None}
    assert record["hardware"].startswith("CPU")
    # Progress with images/s and the time left, then the summary line.
    assert "Epoch 2/2: 128 training images in" in process.stderr
    assert "images/s), elapsed" in process.stderr
    assert "trained all 2 of 2 epochs; selected epoch" in process.stdout


def test_flags_become_train_arguments():
    script = _script()
    args = script["_parser"]().parse_args(["--data-dir", "d"])
    options = script["_options"](args)
    assert options["steps_per_execution"] == 64
    assert options["input_workers"] == 8
    assert options["time_budget"] == 480.0
    assert options["validation"] == "holdout"
    assert options["output_dir"] == os.path.join("runs", "jax_gpu_mnist")
    assert "epochs" not in options  # The preset's: 150.
    dry = script["_options"](script["_parser"]().parse_args(
        ["--data-dir", "d", "--dry-run", "--time-budget-minutes", "1"]))
    assert (dry["epochs"], dry["steps_per_epoch"],
            dry["steps_per_execution"], dry["input_workers"],
            dry["time_budget"]) == (2, 8, 4, None, 60.0)


def test_summary_says_where_the_budget_stopped_training():
    record = {"epochs_trained": 61, "epochs": 150,
              "time_budget": {"seconds": 480.0, "ran_out": True,
                              "stopped_after_epoch": 61},
              "test": {"length_accuracy": 0.9951},
              "protocol": "holdout", "hardware": "GPU: H200",
              "backend": "jax", "selected_epoch": 58,
              "best_validation": 0.99583,
              "dataset_options": {"augmentation": "efficient_capsnet"}}
    line = _script()["_summary"](record, 530.4)
    assert ("stopped after epoch 61 of 150: the 8-minute time budget ran "
            "out; selected epoch 58 (holdout accuracy 0.9958); test error "
            "0.49 %; 530 s in all.") in line
