"""`ResumableBackup`: where it resumes, from a whole, a torn or a broken
backup, and from a backup of Keras' own `BackupAndRestore`."""

import json
import os
import shutil
import signal

import keras
import numpy as np
import pytest

from keras_caps.training.resumable_backup import ResumableBackup


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _iterations(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


@pytest.fixture
def backup_dir(tmp_path):
    """A backup after one 4-step epoch saved every 2 steps: the latest
    pair at the epoch's end, the previous one after its second step."""
    folder = str(tmp_path / "backup")
    backup = ResumableBackup(folder, save_freq=2)
    backup.start(0, 0)
    data = np.ones((8, 3)), np.zeros((8, 1))
    _model().fit(*data, batch_size=2, epochs=1, callbacks=[backup],
                 verbose=0)
    assert backup.steps_this_run == 4
    return folder


def _restore(folder):
    model = _model()
    return ResumableBackup(folder, save_freq=2).restore(model), model


def test_the_latest_backup_is_restored(backup_dir):
    (position, model) = _restore(backup_dir)
    assert position == (1, 0) and _iterations(model) == 4


def test_a_torn_latest_pair_falls_back_to_the_previous(backup_dir):
    # Killed between the weights and the metadata: old metadata.
    latest = os.path.join(backup_dir, "training_metadata.json")
    shutil.copy(latest + ".bkp", latest)
    (position, model) = _restore(backup_dir)
    assert position == (0, 2) and _iterations(model) == 2


def test_a_torn_latest_file_raising_key_error_falls_back(backup_dir,
                                                        monkeypatch):
    # A metadata file without its epoch: the previous pair is restored.
    latest = os.path.join(backup_dir, "training_metadata.json")
    with open(latest, "w") as file:
        json.dump({"iterations": 4}, file)
    (position, model) = _restore(backup_dir)
    assert position == (0, 2) and _iterations(model) == 2
    # Weights whose HDF5 objects are missing (h5py: `KeyError`).
    shutil.copy(latest + ".bkp", latest)
    load = keras.Model.load_weights

    def torn(model, path, *args, **kwargs):
        if path.endswith("latest.weights.h5"):
            raise KeyError("Unable to open object (object 'vars' doesn't "
                           "exist)")
        return load(model, path, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "load_weights", torn)
    (position, model) = _restore(backup_dir)
    assert position == (0, 2) and _iterations(model) == 2


def test_a_kill_between_the_renames_keeps_the_latest_state(backup_dir):
    weights = os.path.join(backup_dir, "latest.weights.h5")
    os.replace(weights, weights + ".bkp")  # The metadata not yet moved.
    (position, model) = _restore(backup_dir)
    assert position == (1, 0) and _iterations(model) == 4


def test_unreadable_weights_are_a_clear_error(backup_dir):
    for name in ("latest.weights.h5", "latest.weights.h5.bkp"):
        with open(os.path.join(backup_dir, name), "wb") as file:
            file.write(b"truncated")
    with pytest.raises(ValueError, match="backup in .*cannot be restored.*"
                       "Delete that folder"):
        _restore(backup_dir)


def test_a_backup_of_keras_resumes_at_its_epoch(backup_dir):
    # Keras' metadata: no step count, no iterations.
    for suffix in ("", ".bkp"):
        path = os.path.join(backup_dir, "training_metadata.json" + suffix)
        with open(path, "w") as file:
            json.dump({"epoch": 1, "batch": 0}, file)
    (position, _) = _restore(backup_dir)
    assert position == (1, 0)


def test_no_backup_starts_at_the_beginning(tmp_path):
    (position, model) = _restore(str(tmp_path / "none"))
    assert position == (0, 0) and _iterations(model) == 0


@pytest.mark.single_backend
def test_a_ctrl_c_during_a_save_waits_for_the_whole_pair(tmp_path):
    # Ctrl-C (SIGINT) arrives while the weights are being written, as it
    # can when a user interrupts at a backup: the pair is finished first,
    # then the interrupt is delivered.
    folder = str(tmp_path / "backup")
    backup = ResumableBackup(folder, save_freq=2)
    model = _model()
    save_weights = model.save_weights

    def interrupted_save(path, *args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        save_weights(path, *args, **kwargs)

    model.save_weights = interrupted_save
    backup.set_model(model)
    # A process started in the background by a shell ignores SIGINT from
    # its start (as CI's may); the test sets Python's own handler.
    handler_before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            backup._save(1, 0)
        # The handler in place before the save is back.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, handler_before)
    assert sorted(os.listdir(folder)) == ["latest.weights.h5",
                                          "training_metadata.json"]
    with open(os.path.join(folder, "training_metadata.json")) as file:
        assert json.load(file)["epoch"] == 1
    assert _restore(folder)[0] == (1, 0)
