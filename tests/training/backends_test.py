"""`keras-caps train` and `evaluate` on JAX and PyTorch, each in a process
of its own backend: a run killed mid-epoch resumes without repeating a
step, `DataParallel` on two CPU devices trains as one device does,
mixed precision, the run records, and the strategies a backend does not
have refused before anything is written."""

import ast
import csv
import json
import os
import pathlib
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_caps.runs import is_keras_caps_export
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.testing.killed_runs import KILLED_AFTER_BACKUP
from keras_caps.testing.without_tensorflow import REFUSE_TENSORFLOW
from keras_caps.testing.xla_flags import fast_xla_flags

_WORKTREE = pathlib.Path(__file__).resolve().parents[2]


# Runs `keras-caps` with the arguments after the first, then evaluates the
# model it saved, writing `evaluate`'s record to the first argument.
_TRAIN_THEN_EVALUATE = """
import json, sys
from keras_caps import cli, training

arguments = sys.argv[2:]
code = cli.main(arguments)
assert code == 0, code
value = lambda flag: arguments[arguments.index(flag) + 1]
record = training.evaluate(value("--output-dir") + "/model.keras",
                           "mnist", data_dir=value("--data-dir"))
with open(sys.argv[1], "w") as file:
    json.dump(record, file)
"""


# JAX compiles thousands of small computations here: XLA compiles fast,
# as for the JAX tests (code speed, not results).
_FAST_XLA = fast_xla_flags("jax")


def _run(script, arguments, backend, expect=0, **environment):
    if backend == "jax":
        environment["XLA_FLAGS"] = " ".join(
            [_FAST_XLA, environment.get("XLA_FLAGS", "")]).strip()
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(_WORKTREE), **environment)
    process = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)], env=env,
        capture_output=True, text=True, timeout=600, cwd=str(_WORKTREE))
    assert process.returncode == expect, process.stderr[-3000:]
    return process


def _tiny_mnist(folder):
    # 120 training examples: 108 after the 10% holdout, 6 steps of 16.
    return write_idx_dataset(str(folder), synthetic_digits(120, seed=0),
                             synthetic_digits(16, seed=1))


def _read(path):
    with open(path) as file:
        return json.load(file)


def _accuracy(model_path, data_dir):
    """The test accuracy of a saved model, computed in this process (its
    own backend) from the raw test digits, without keras_caps."""
    images, labels = synthetic_digits(16, seed=1)
    model = keras.saving.load_model(model_path)
    scores = np.asarray(model.predict(
        images[..., None].astype("float32"), verbose=0))
    return float(np.mean(scores.argmax(axis=-1) == labels))


def _check_export(output_dir, record):
    """The run exported, or skipped the export saying why (a backend or
    an installation that cannot write it)."""
    if "export_skipped" in record:
        assert record["export_skipped"]
        assert not os.path.exists(os.path.join(output_dir, "export"))
    else:
        assert is_keras_caps_export(os.path.join(output_dir, "export"))


@pytest.mark.single_backend
def test_jax_run_killed_mid_epoch_resumes_and_evaluates(tmp_path):
    data_dir = _tiny_mnist(tmp_path / "mnist")
    output_dir = tmp_path / "run"
    arguments = ["train", "--dataset", "mnist", "--data-dir", data_dir,
                 "--output-dir", output_dir, "--epochs", "2",
                 "--batch-size", "16", "--backup-frequency", "2",
                 "--no-reconstruction"]
    # Killed in the second epoch, right after the backup of its 2nd step.
    _run(KILLED_AFTER_BACKUP, [1, 2, *arguments], "jax",
         expect=-signal.SIGKILL)
    state = _read(output_dir / "backup" / "training_metadata.json")
    assert (state["epoch"], state["steps_done_in_epoch"]) == (1, 2)
    assert state["iterations"] == 6 + 2

    evaluated = tmp_path / "evaluated.json"
    _run(_TRAIN_THEN_EVALUATE, [evaluated, *arguments], "jax")
    record = _read(output_dir / "metrics.json")
    # The rest of the second epoch only: 2 x 6 steps in all.
    assert record["train_steps_this_run"] == 4
    assert record["train_steps_total"] == 12
    with open(output_dir / "history.csv") as file:
        assert [int(row["epoch"]) for row in csv.DictReader(file)] == [0, 1]
    assert record["backend"] == "jax"
    assert "jax" in record["versions"]
    assert record["strategy"] == "OneDevice"
    assert record["selected_epoch"] in (1, 2)
    assert _read(output_dir / "run.json")["progress"]["backends"] == ["jax"]
    assert not (output_dir / "backup").exists()
    _check_export(output_dir, record)
    # `evaluate` on JAX, the run's test metrics and this process's own
    # count agree: model.keras is the selected model.
    evaluation = _read(evaluated)
    assert evaluation["backend"] == "jax"
    accuracy = _accuracy(str(output_dir / "model.keras"), data_dir)
    np.testing.assert_allclose(evaluation["test"]["accuracy"], accuracy,
                               atol=1e-6)
    np.testing.assert_allclose(record["test"]["accuracy"], accuracy,
                               atol=1e-6)


# Trains the same tiny run under `DataParallel` over the two CPU devices
# and on one device, and tries what the strategy refuses.
_DATA_PARALLEL = """
import json, os, sys
from keras_caps import training

data_dir, folder = sys.argv[1], sys.argv[2]
common = dict(data_dir=data_dir, epochs=1, batch_size=16,
              steps_per_epoch=3, reconstruction=False, verbose=0)
records = {}
for strategy in ("mirrored", "one_device"):
    records[strategy] = training.train(
        output_dir=os.path.join(folder, strategy), strategy=strategy,
        **common)
errors = {}
for strategy, batch_size in (("mirrored", 15), ("tpu", 16),
                             ("multi_worker", 16)):
    try:
        training.train(output_dir=os.path.join(folder, "refused"),
                       strategy=strategy, **{**common,
                                             "batch_size": batch_size})
    except ValueError as error:
        errors[strategy] = str(error)
records["errors"] = errors
refused = os.path.join(folder, "refused")
records["refused_files"] = (os.listdir(refused) if os.path.exists(refused)
                            else [])
with open(os.path.join(folder, "records.json"), "w") as file:
    json.dump(records, file)
"""


@pytest.mark.single_backend
def test_jax_data_parallel_on_two_cpu_devices_trains_as_one_device(
        tmp_path):
    data_dir = _tiny_mnist(tmp_path / "mnist")
    _run(_DATA_PARALLEL, [data_dir, tmp_path], "jax",
         XLA_FLAGS="--xla_force_host_platform_device_count=2")
    records = _read(tmp_path / "records.json")
    parallel, single = records["mirrored"], records["one_device"]
    assert (parallel["strategy"], parallel["num_replicas"]) == (
        "DataParallel", 2)
    assert (single["strategy"], single["num_replicas"]) == ("OneDevice", 1)
    # Each global batch split in two, gradients summed across the devices
    # (batch statistics too): the same training, up to float rounding.
    np.testing.assert_allclose(parallel["test"]["loss"],
                               single["test"]["loss"], rtol=1e-4)
    weights = [keras.saving.load_model(
        str(tmp_path / name / "model.keras")).get_weights()
        for name in ("mirrored", "one_device")]
    for one, other in zip(*weights):
        np.testing.assert_allclose(one, other, rtol=1e-3, atol=1e-5)
    errors = records["errors"]
    assert "expected a multiple of 2. Received: batch_size=15" in errors[
        "mirrored"]
    assert "KERAS_BACKEND=tensorflow" in errors["tpu"]
    assert "KERAS_BACKEND=tensorflow" in errors["multi_worker"]
    assert records["refused_files"] == []  # Refused before any write.


# Asks `keras-caps train` (the arguments after the first) for each strategy
# PyTorch does not have, then trains, evaluates, and writes the exit codes,
# error lines and evaluation to the first argument.
_REFUSED_THEN_TRAINED = """
import contextlib, io, json, sys
from keras_caps import cli, training

arguments = sys.argv[2:]
refused = {}
for strategy in ("mirrored", "multi_worker", "tpu"):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = cli.main([*arguments, "--strategy", strategy])
    refused[strategy] = [code, stderr.getvalue().strip()]
assert cli.main(arguments) == 0
value = lambda flag: arguments[arguments.index(flag) + 1]
evaluated = training.evaluate(value("--output-dir") + "/model.keras",
                              "mnist", data_dir=value("--data-dir"))
with open(sys.argv[1], "w") as file:
    json.dump({"refused": refused, "evaluated": evaluated}, file)
"""


@pytest.mark.single_backend
def test_torch_trains_in_mixed_precision_and_refuses_other_strategies(
        tmp_path):
    data_dir = _tiny_mnist(tmp_path / "mnist")
    output_dir = tmp_path / "run"
    result = tmp_path / "result.json"
    _run(_REFUSED_THEN_TRAINED, [
        result, "train", "--dataset", "mnist", "--data-dir", data_dir,
        "--batch-size", "16", "--epochs", "1", "--steps-per-epoch", "2",
        "--no-reconstruction", "--precision", "mixed_bfloat16",
        "--output-dir", output_dir], "torch")
    result = _read(result)
    for strategy, (code, error) in result["refused"].items():
        assert code == 2, (strategy, error)
        assert len(error.splitlines()) == 1, error  # One line.
        assert error.startswith("keras-caps train: error: The "
                                f"{strategy!r} strategy is not available "
                                "on the 'torch' backend"), error
        assert "KERAS_BACKEND=" in error
    record = _read(output_dir / "metrics.json")
    assert (record["backend"], record["precision"]) == (
        "torch", "mixed_bfloat16")
    assert record["train_steps_total"] == 2
    assert "torch" in record["versions"]
    model = keras.saving.load_model(str(output_dir / "model.keras"))
    assert model.get_layer("conv_1").dtype_policy.name == "mixed_bfloat16"
    assert result["evaluated"]["backend"] == "torch"
    _check_export(output_dir, record)


# The packages `keras-caps train`, `evaluate`, `compare` and `plot` use
# beyond the input path (`datasets`) and the export (`export`).
_RECIPE_PACKAGES = ("training", "cli", "evaluation", "visualization",
                    "callbacks")


@pytest.mark.single_backend
def test_recipe_modules_import_tensorflow_only_inside_functions():
    top_level = []
    for package in _RECIPE_PACKAGES:
        for path in sorted((_WORKTREE / "keras_caps" / package).glob(
                "*.py")):
            tree = ast.parse(path.read_text())
            for node in tree.body:  # Module level only.
                names = ([alias.name for alias in node.names]
                         if isinstance(node, ast.Import) else
                         [node.module or ""]
                         if isinstance(node, ast.ImportFrom) else [])
                if any(name.split(".")[0] == "tensorflow"
                       for name in names):
                    top_level.append(f"{path.name}:{node.lineno}")
    assert not top_level, top_level


# Runs each `keras-caps` command of the JSON list in its first argument,
# in one process where TensorFlow cannot be imported.
_COMMANDS_WITHOUT_TENSORFLOW = REFUSE_TENSORFLOW + """
import json
from keras_caps import cli
for arguments in json.loads(sys.argv[1]):
    code = cli.main(arguments)
    if code:
        sys.exit(code)
assert "tensorflow" not in sys.modules or sys.modules["tensorflow"] is None
"""


@pytest.mark.single_backend
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_train_and_evaluate_where_tensorflow_cannot_be_imported(
        backend, tmp_path):
    if backend == "torch":
        pytest.importorskip("torch")
    data_dir = str(_tiny_mnist(tmp_path / "mnist"))
    output_dir = str(tmp_path / "run")
    evaluation = str(tmp_path / "evaluation.json")
    commands = [
        ["train", "--dataset", "mnist", "--data-dir", data_dir,
         "--output-dir", output_dir, "--epochs", "2", "--batch-size", "16",
         "--steps-per-epoch", "2", "--no-reconstruction"],
        ["evaluate", "--model-path", os.path.join(output_dir, "model.keras"),
         "--dataset", "mnist", "--data-dir", data_dir,
         "--output", evaluation]]
    process = _run(_COMMANDS_WITHOUT_TENSORFLOW, [json.dumps(commands)],
                   backend)
    assert "TensorBoard logs skipped" in process.stderr
    assert not (tmp_path / "run" / "logs").exists()
    record = _read(tmp_path / "run" / "metrics.json")
    assert record["backend"] == backend
    assert "tensorflow" not in record["versions"]
    assert record["train_steps_total"] == 4
    _check_export(output_dir, record)
    # `evaluate`'s accuracy is the saved model's on the 16 test digits,
    # scored here independently.
    evaluated = _read(evaluation)
    assert evaluated["backend"] == backend
    np.testing.assert_allclose(
        evaluated["test"]["accuracy"],
        _accuracy(os.path.join(output_dir, "model.keras"), data_dir),
        atol=1e-6)
