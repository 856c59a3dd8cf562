"""Keeps `history.csv` at one row per finished epoch across resumes."""

import csv
import logging
import os

import keras

from keras_caps.runs.atomic_files import write_atomically


class HistoryTrim(keras.callbacks.Callback):
    """Drops `history.csv` rows of the epochs a resumed run trains again.

    `keras.callbacks.CSVLogger(append=True)` adds a row per epoch. When
    `BackupAndRestore` resumes a run at epoch `e` (from the latest backup,
    or from the previous one when the latest is unreadable), rows of
    epochs `e` and later would be written twice; this callback, placed
    after `BackupAndRestore` and before the `CSVLogger`, removes them when
    training begins, so the log has exactly one row per finished epoch.

    Args:
        path: str. The CSV log of `CSVLogger`.

    Example:

    ```python
    callbacks = [keras.callbacks.BackupAndRestore("run/backup"),
                 HistoryTrim("run/history.csv"),
                 keras.callbacks.CSVLogger("run/history.csv", append=True)]
    ```
    """

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_train_begin(self, logs=None):
        # The epoch `fit` starts at: set by `BackupAndRestore`'s
        # `on_train_begin`, or by the recipe before `fit`.
        first_epoch = getattr(self.model, "_initial_epoch", None) or 0
        trim_history(self.path, first_epoch)


def trim_history(path, first_epoch):
    """Keeps the rows of `path` whose `epoch` is below `first_epoch`."""
    if not os.path.exists(path):
        return
    with open(path, newline="") as file:
        rows = list(csv.reader(file))
    if not rows or "epoch" not in rows[0]:
        return
    column = rows[0].index("epoch")
    kept = [rows[0]] + [row for row in rows[1:]
                        if len(row) > column and row[column].isdigit()
                        and int(row[column]) < first_epoch]
    if len(kept) == len(rows):
        return

    def write(temporary):
        with open(temporary, "w", newline="") as file:
            csv.writer(file).writerows(kept)

    write_atomically(path, write)
    logging.info("Removed %d rows of epochs from %d on from %s: they are "
                 "trained again.", len(rows) - len(kept), first_epoch + 1,
                 path)
