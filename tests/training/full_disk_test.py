"""A full disk when the trained model is saved loses no training: the
error says where the selected model is, and the same command finishes."""

import errno
import json
import os

import keras

from keras_caps import cli
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.training import run_artifacts


def test_a_full_disk_at_the_final_save_keeps_the_training(
        tmp_path, capsys, monkeypatch):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40, seed=0),
                                 synthetic_digits(8, seed=1))
    output_dir = tmp_path / "run"
    argv = ["train", "--data-dir", data_dir, "--output-dir",
            str(output_dir), "--epochs", "1", "--steps-per-epoch", "1",
            "--batch-size", "8", "--no-reconstruction"]
    save = run_artifacts.save_model_atomically

    def full_disk(model, path):
        if os.path.basename(path) == "model.keras":
            raise OSError(errno.ENOSPC, "No space left on device", path)
        save(model, path)

    monkeypatch.setattr(run_artifacts, "save_model_atomically", full_disk)
    assert cli.main(argv) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    best = str(output_dir / "checkpoints" / "best.keras")
    assert "No space left on device" in error
    assert repr(str(output_dir / "model.keras")) in error
    assert f"the selected model is in {best!r}" in error
    assert "rerun the same command" in error
    assert not (output_dir / "model.keras").exists()
    progress = json.loads((output_dir / "run.json").read_text())["progress"]
    assert progress["trained"]["train_steps_total"] == 1

    # Space again: the same command writes the rest, without training.
    monkeypatch.setattr(run_artifacts, "save_model_atomically", save)

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(keras.Model, "fit", no_training)
    assert cli.main(argv) == 0
    model = keras.saving.load_model(output_dir / "model.keras")
    selected = keras.saving.load_model(best)
    for saved, kept in zip(model.weights, selected.weights):
        assert (keras.ops.convert_to_numpy(saved)
                == keras.ops.convert_to_numpy(kept)).all()
    assert (output_dir / "metrics.json").exists()
    assert (output_dir / "export" / "saved_model.pb").exists()
