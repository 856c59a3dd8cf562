import csv
import json
import os

import keras
import numpy as np

from keras_caps.training.history_trim import HistoryTrim
from keras_caps.training.history_trim import trim_history


def _epochs(path):
    with open(path) as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


def test_trim_keeps_rows_before_the_resumed_epoch(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss\n0,0.9\n1,0.8\n2,0.7\n1,0.8\n")
    trim_history(str(path), 2)
    assert path.read_text().splitlines() == ["epoch,loss", "0,0.9", "1,0.8",
                                             "1,0.8"]
    trim_history(str(path), 1)
    assert _epochs(path) == [0]
    trim_history(str(tmp_path / "missing.csv"), 0)  # Nothing to trim.
    assert not (tmp_path / "missing.csv").exists()


def test_a_resumed_fit_logs_each_epoch_once(tmp_path):
    """Without the trim, a backup older than the log (the previous backup
    used after a corrupt latest one) makes the CSV log repeat epochs."""
    history = str(tmp_path / "history.csv")
    backup = str(tmp_path / "backup")
    x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)

    def resumed_epoch():
        """The epoch the backup resumes (0 without one)."""
        path = os.path.join(backup, "training_metadata.json")
        if not os.path.exists(path):
            return 0
        with open(path) as file:
            return json.load(file)["epoch"]

    def fit(epochs):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(x, y, epochs=epochs, batch_size=4, verbose=0, callbacks=[
            keras.callbacks.BackupAndRestore(backup,
                                             delete_checkpoint=False),
            HistoryTrim(history, first_epoch=resumed_epoch()),
            keras.callbacks.CSVLogger(history, append=True)])

    fit(2)
    # The backup says one epoch finished, the log has two rows.
    with open(os.path.join(backup, "training_metadata.json"), "w") as file:
        file.write('{"epoch": 1, "batch": 0}')
    fit(3)
    assert _epochs(history) == [0, 1, 2]
