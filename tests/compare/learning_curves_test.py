"""Learning curves of a comparison (#22, item 5) from hand-written logs."""

import json
import os

import numpy as np
import pytest

from keras_caps.compare import learning_curves

pytestmark = pytest.mark.single_backend


def _run(folder, accuracies, steps_per_epoch=5,
         monitor="val_length_accuracy"):
    """A finished run's `history.csv` and `metrics.json`, as the recipe
    writes them (one row per epoch, 0-based)."""
    os.makedirs(folder)
    with open(os.path.join(folder, "history.csv"), "w") as file:
        file.write(f"epoch,loss,{monitor}\n")
        for epoch, accuracy in enumerate(accuracies):
            file.write(f"{epoch},0.5,{accuracy}\n")
    with open(os.path.join(folder, "metrics.json"), "w") as file:
        json.dump({"monitor": monitor,
                   "train_steps_per_epoch": steps_per_epoch}, file)
    return folder


def test_curves_their_mean_and_spread(tmp_path):
    # Two seeds of 3 epochs, one stopped after 2 (trained until an
    # accuracy): the mean is over the steps both reached.
    folders = {
        "dynamic": {0: _run(tmp_path / "d0", [0.5, 0.7, 0.9]),
                    1: _run(tmp_path / "d1", [0.3, 0.9])},
        "cnn": {0: _run(tmp_path / "c0", [0.6, 0.8], monitor="val_accuracy")},
    }
    curves = learning_curves.learning_curves(folders)
    dynamic = curves["dynamic"]
    assert dynamic["seeds"]["0"] == {
        "monitor": "val_length_accuracy", "x": "steps",
        "steps": [5, 10, 15], "accuracy": [0.5, 0.7, 0.9]}
    assert dynamic["steps"] == [5, 10]
    np.testing.assert_allclose(dynamic["mean"], [0.4, 0.8])
    # Sample std of two values a, b: |a - b| / sqrt(2).
    np.testing.assert_allclose(dynamic["std"],
                               [0.2 / np.sqrt(2), 0.2 / np.sqrt(2)])
    assert curves["cnn"]["std"] is None  # One seed: no spread.
    np.testing.assert_allclose(curves["cnn"]["mean"], [0.6, 0.8])
    path = learning_curves.plot_learning_curves(
        curves, str(tmp_path / "curves.png"))
    with open(path, "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_run_without_steps_or_logs(tmp_path):
    folder = _run(tmp_path / "run", [0.5, 0.6], steps_per_epoch=None)
    curve = learning_curves.read_learning_curve(folder)
    assert curve["x"] == "epochs" and curve["steps"] == [1, 2]
    assert learning_curves.read_learning_curve(str(tmp_path / "no")) is None
    curves = learning_curves.learning_curves({"a": {0: str(tmp_path / "x")}})
    assert curves["a"] == {"seeds": {}, "steps": [], "mean": [], "std": None}


def test_the_note_lists_the_models_that_missed_the_target():
    settings = {"until_accuracy": 0.95, "epochs": 20}
    models = [
        {"router": "dynamic", "seed": 0,
         "until_accuracy": {"reached": True, "epoch": 4}},
        {"router": "cnn", "seed": 1,
         "until_accuracy": {"reached": False, "epoch": None}},
    ]
    (_, line) = learning_curves.until_accuracy_notes(
        {"settings": settings, "models": models})
    assert "reached 95.00 % (at most 20 epochs)" in line
    assert line.endswith("at their best epoch: cnn (seed 1).")
    (_, line) = learning_curves.until_accuracy_notes(
        {"settings": settings, "models": models[:1]})
    assert line.endswith("Every model reached it.")
    assert learning_curves.until_accuracy_notes(
        {"settings": {"epochs": 2}, "models": models}) == []
