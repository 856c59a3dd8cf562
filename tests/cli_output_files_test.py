"""`evaluate --output` and `plot --output` never replace a file they did not
write: a run's or a comparison's own files and a user's files are refused
before any work, byte for byte unchanged; a file the same command wrote
earlier is replaced, atomically (#27, defect 1)."""

import json
import os

import matplotlib
import pytest

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.folder_contents import folder_contents

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run's folder (model, records, log) and test data."""
    folder = tmp_path_factory.mktemp("outputs")
    write_idx_dataset(str(folder / "mnist"), synthetic_digits(16),
                      synthetic_digits(16))
    run = folder / "run"
    run.mkdir()
    EfficientCapsNet("mnist", reconstruction=False).save(run / "model.keras")
    (run / "run.json").write_text(json.dumps(
        {"settings": {"seed": 1}, "progress": {"complete": True}}))
    (run / "history.csv").write_text(
        "epoch,loss,accuracy\n0,1.0,0.5\n1,0.5,0.75\n")
    return folder


def _evaluate(run, output):
    return cli.main(["evaluate", "--model-path",
                     str(run / "run" / "model.keras"), "--data-dir",
                     str(run / "mnist"), "--output", str(output)])


def _plot_curves(run, output):
    return cli.main(["plot", "curves", "--log",
                     str(run / "run" / "history.csv"), "--output",
                     str(output), "--dpi", "20"])


def _error(capsys):
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def test_the_runs_own_files_are_refused(run, capsys):
    folder = run / "run"
    before = folder_contents(run)
    for name in ("model.keras", "run.json", "metrics.json",
                 "checkpoints/best.keras"):
        assert _evaluate(run, folder / name) == 2, name
        error = _error(capsys)
        assert str(folder / name) in error, error
        assert "only `keras-caps train` writes" in error, error
    for name in ("run.json", "history.csv", "export/curves.png"):
        assert _plot_curves(run, folder / name) == 2, name
        assert "only `keras-caps train` writes" in _error(capsys)
    assert folder_contents(run) == before


def test_a_comparisons_own_files_are_refused(run, tmp_path, capsys):
    (tmp_path / "compare.json").write_text("{}")
    assert _plot_curves(run, tmp_path / "accuracy_vs_severity.png") == 2
    assert "only `keras-caps compare` writes" in _error(capsys)
    assert _evaluate(run, tmp_path / "results.json") == 2
    assert "only `keras-caps compare` writes" in _error(capsys)
    assert os.listdir(tmp_path) == ["compare.json"]


def test_a_users_files_are_refused(run, tmp_path, capsys):
    import matplotlib.pyplot as plt

    (tmp_path / "mine.json").write_text('{"mine": 1}')
    figure = plt.figure(figsize=(1, 1))
    figure.savefig(tmp_path / "mine.png", format="png")
    plt.close(figure)
    os.symlink(tmp_path / "mine.json", tmp_path / "link.json")
    before = folder_contents(tmp_path)
    for output in ("mine.json", "mine.png", "link.json"):
        assert _evaluate(run, tmp_path / output) == 2
        assert "was not written by `keras-caps evaluate`" in _error(capsys)
        assert _plot_curves(run, tmp_path / output) == 2
        error = _error(capsys)
        assert "was not written by `keras-caps plot`" in error
        assert f"`--output` {str(tmp_path / output)!r}" in error
    assert folder_contents(tmp_path) == before
    assert os.path.islink(tmp_path / "link.json")


def test_a_file_the_same_command_wrote_is_replaced(run, tmp_path, capsys):
    metrics, figure = tmp_path / "metrics.json", tmp_path / "curves.png"
    for _ in range(2):
        assert _evaluate(run, metrics) == 0
        assert _plot_curves(run, figure) == 0
    record = json.loads(metrics.read_text())
    assert record["written_by"] == "keras-caps evaluate"
    assert 0.0 <= record["test"]["accuracy"] <= 1.0
    capsys.readouterr()
    # Each command's mark is its own: neither replaces the other's file.
    assert _evaluate(run, figure) == 2
    assert _plot_curves(run, metrics) == 2
    assert json.loads(metrics.read_text()) == record
    assert sorted(os.listdir(tmp_path)) == ["curves.png", "metrics.json"]


def test_a_failed_figure_write_names_the_file_and_leaves_nothing(
        run, tmp_path, monkeypatch, capsys):
    from keras_caps.runs import atomic_files

    def failing_replace(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "replace", failing_replace)
    output = tmp_path / "curves.png"
    assert _plot_curves(run, output) == 1
    error = _error(capsys)
    assert "No space left on device" in error and str(output) in error
    assert os.listdir(tmp_path) == []
