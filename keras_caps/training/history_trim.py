"""Keeps `history.csv` at one row per finished epoch across resumes."""

import csv
import logging
import os

import keras

from keras_caps.runs.atomic_files import write_atomically


class HistoryTrim(keras.callbacks.Callback):
    """Drops `history.csv` rows of the epochs a resumed run trains again.

    `keras.callbacks.CSVLogger(append=True)` adds a row per epoch. When a
    run resumes at epoch `e` (from the latest backup, or from the previous
    one when the latest is unreadable), rows of epochs `e` and later would
    be written twice; this callback, placed before the `CSVLogger`,
    removes them when training begins, so the log has exactly one row per
    finished epoch.

    Args:
        path: str. The CSV log of `CSVLogger`.
        first_epoch: int. The epoch (0-based) `fit` starts at (its
            `initial_epoch`, or the epoch a backup resumes): rows of this
            epoch and later are dropped.

    Example:

    ```python
    callbacks = [HistoryTrim("run/history.csv", first_epoch=3),
                 keras.callbacks.CSVLogger("run/history.csv", append=True)]
    model.fit(data, initial_epoch=3, epochs=10, callbacks=callbacks)
    ```
    """

    def __init__(self, path, first_epoch):
        super().__init__()
        self.path = path
        self.first_epoch = int(first_epoch)

    def on_train_begin(self, logs=None):
        trim_history(self.path, self.first_epoch)


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
