"""`keras-caps evaluate`, `export` and `plot` under misuse and faults (#16).

Each case runs the command (in a fresh process where the exit status and
the absence of a traceback are the point) and checks the exit status, the
one-line error and that nothing was lost or left behind.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

WORKTREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_cli(*argv, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=WORKTREE)
    return subprocess.run([sys.executable, "-m", "keras_caps.cli", *argv],
                          cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _error_line(stderr, command):
    assert "Traceback" not in stderr, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines()
               if line.startswith(f"keras-caps {command}: error:")]
    return line


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A model without decoder, its data, and nothing else."""
    folder = tmp_path_factory.mktemp("faults")
    write_idx_dataset(str(folder / "mnist"), synthetic_digits(16),
                      synthetic_digits(16))
    EfficientCapsNet("mnist", reconstruction=False).save(
        folder / "model.keras")
    return folder


def test_evaluate_output_folder_and_unwritable_output(run_folder, tmp_path,
                                                     capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "a_file").write_text("keep me")
    result = _run_cli(
        "evaluate", "--model-path", str(run_folder / "model.keras"),
        "--data-dir", str(run_folder / "mnist"), "--output", "taken",
        cwd=tmp_path)
    assert result.returncode == 2
    assert "is a folder" in _error_line(result.stderr, "evaluate")
    assert cli.main(["evaluate", "--model-path",
                     str(run_folder / "model.keras"), "--data-dir",
                     str(run_folder / "mnist"), "--output",
                     str(tmp_path / "a_file" / "metrics.json")]) == 2
    assert "is not a writable folder" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a_file", "taken"]
    assert os.listdir(tmp_path / "taken") == []
    assert (tmp_path / "a_file").read_text() == "keep me"


def test_evaluate_prints_the_metrics_when_the_write_fails(
        run_folder, tmp_path, monkeypatch, capsys):
    """A write that fails after the evaluation loses no metrics and leaves
    no temporary file."""
    from keras_caps.runs import atomic_files

    def failing_replace(source, target):
        raise PermissionError(13, "Permission denied", target)

    monkeypatch.setattr(atomic_files.os, "replace", failing_replace)
    output = tmp_path / "metrics.json"
    assert cli.main(["evaluate", "--model-path",
                     str(run_folder / "model.keras"), "--data-dir",
                     str(run_folder / "mnist"), "--output",
                     str(output)]) == 1
    captured = capsys.readouterr()
    record = json.loads(captured.out[captured.out.index("{"):])
    assert 0.0 <= record["test"]["accuracy"] <= 1.0
    assert "the metrics are printed above" in captured.err
    assert "Permission denied" in captured.err
    assert os.listdir(tmp_path) == []


def test_broken_model_files_are_named(run_folder, tmp_path, capsys):
    with open(run_folder / "model.keras", "rb") as file:
        data = file.read()
    (tmp_path / "truncated.keras").write_bytes(data[:len(data) // 2])
    (tmp_path / "garbage.keras").write_bytes(b"\x00garbage" * 100)
    data_dir = str(run_folder / "mnist")
    for name in ("truncated.keras", "garbage.keras"):
        path = str(tmp_path / name)
        for argv in (["evaluate", "--model-path", path, "--data-dir",
                      data_dir],
                     ["export", "--model-path", path, "--export-dir",
                      str(tmp_path / "export")],
                     ["plot", "routing", "--model-path", path, "--data-dir",
                      data_dir, "--output", str(tmp_path / "x.png")]):
            assert cli.main(argv) == 2
            error = capsys.readouterr().err
            assert "is not a readable .keras file" in error, error
            assert "not a zip archive" in error and path in error, error
            assert "File not found" not in error
    assert sorted(os.listdir(tmp_path)) == ["garbage.keras",
                                            "truncated.keras"]


def test_evaluate_names_a_corrupt_run_record(run_folder, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    os.link(run_folder / "model.keras", run / "model.keras")
    for content in ('{"dataset": "mnist", "dataset_opt', '["mnist"]'):
        (run / "metrics.json").write_text(content)
        assert cli.main(["evaluate", "--model-path", str(run / "model.keras"),
                         "--data-dir", str(run_folder / "mnist")]) == 2
        error = capsys.readouterr().err
        assert str(run / "metrics.json") in error, error
        assert "Repair or delete" in error
        assert error.count("\n") == 1


def test_evaluate_refuses_a_plain_keras_model(run_folder, tmp_path):
    inputs = keras.Input((28, 28, 1), name="image")
    outputs = keras.layers.Dense(10, name="scores")(
        keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(loss="categorical_crossentropy")
    model.save(tmp_path / "plain.keras")
    result = _run_cli("evaluate", "--model-path", "plain.keras",
                      "--data-dir", str(run_folder / "mnist"), cwd=tmp_path)
    assert result.returncode == 2
    line = _error_line(result.stderr, "evaluate")
    assert "is not a model built by keras_caps" in line, line
    assert "'scores'" in line


def test_evaluate_refuses_an_uncompiled_model(run_folder, tmp_path, capsys):
    path = str(tmp_path / "uncompiled.keras")
    EfficientCapsNet("mnist", reconstruction=False, compile=False).save(path)
    assert cli.main(["evaluate", "--model-path", path, "--data-dir",
                     str(run_folder / "mnist")]) == 2
    error = capsys.readouterr().err
    assert "saved without its compiled loss and metrics" in error, error
    assert error.count("\n") == 1


def test_images_in_zero_one_are_refused_by_evaluate_and_plot(
        run_folder, tmp_path, capsys):
    """IDX files holding 0/1 pixels (images scaled to [0, 1])."""
    images, labels = synthetic_digits(16)
    binary = (images > 127).astype("uint8")
    data_dir = write_idx_dataset(str(tmp_path / "unit"), (binary, labels),
                                 (binary, labels))
    model_path = str(run_folder / "model.keras")
    for argv in (["evaluate", "--model-path", model_path, "--data-dir",
                  data_dir],
                 ["plot", "routing", "--model-path", model_path,
                  "--data-dir", data_dir, "--output",
                  str(tmp_path / "routing.png")]):
        assert cli.main(argv) == 2
        error = capsys.readouterr().err
        assert "look scaled to [0, 1]" in error, error
        assert "--input-range unit" in error
    assert not os.path.exists(tmp_path / "routing.png")
    # The same model and command on raw pixels run.
    assert cli.main(["plot", "routing", "--model-path", model_path,
                     "--data-dir", str(run_folder / "mnist"), "--output",
                     str(tmp_path / "routing.png"), "--dpi", "30"]) == 0


@pytest.mark.parametrize("content", [
    b"\x89PNG\r\n\x1a\n\xff\xfe garbage",
    b"hello\nworld\n",
    b"epoch,loss,accuracy\n0,abc,0.5\n",
    b"epoch,loss\n0,1.0,7\n",
    b"loss,accuracy\n,\n,\n",
])
def test_plot_curves_refuses_a_garbage_log(content, tmp_path, capsys):
    log = tmp_path / "history.csv"
    log.write_bytes(content)
    assert cli.main(["plot", "curves", "--log", str(log), "--output",
                     str(tmp_path / "curves.png")]) == 2
    error = capsys.readouterr().err
    assert str(log) in error or "no finite value" in error, error
    assert error.count("\n") == 1, error
    assert sorted(os.listdir(tmp_path)) == ["history.csv"]


def test_export_reconstruction_without_decoder_and_unit_range(run_folder,
                                                              tmp_path):
    result = _run_cli("export", "--model-path",
                      str(run_folder / "model.keras"), "--export-dir",
                      "exported", "--reconstruction", cwd=tmp_path)
    assert result.returncode == 2
    assert "has none" in _error_line(result.stderr, "export")
    assert os.listdir(tmp_path) == []

    assert cli.main(["export", "--model-path",
                     str(run_folder / "model.keras"), "--export-dir",
                     str(tmp_path / "exported"), "--input-range",
                     "unit"]) == 0
    with open(tmp_path / "exported" / "keras_caps_export.json") as file:
        assert json.load(file)["input_range"] == "unit"
    served = tf.saved_model.load(str(tmp_path / "exported"))
    images = np.random.default_rng(0).uniform(
        0, 255, (3, 28, 28, 1)).astype("float32")
    model = keras.saving.load_model(run_folder / "model.keras")
    np.testing.assert_allclose(
        served.serve(tf.constant(images / 255.0))["length"],
        model(images), atol=1e-5)
