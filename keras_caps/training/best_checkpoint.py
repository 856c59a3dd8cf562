import logging
import math
import os

import keras

from keras_caps.runs.atomic_files import save_model_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record

# Single-object accuracy, then MultiMNIST's official per-digit accuracy
# (of a decoder model's "length" output, or of a model without decoder,
# whose exact-match accuracy would come first in alphabetical order).
_PREFERRED_MONITORS = ("val_length_accuracy", "val_accuracy",
                       "val_length_multi_digit_accuracy",
                       "val_multi_digit_accuracy")


class BestCheckpoint(keras.callbacks.Callback):
    """Keeps the best model on a validation metric, written atomically.

    Unlike `keras.callbacks.ModelCheckpoint`, which only warns when its
    monitored key is missing (the official MultiMNIST run never saved a
    checkpoint because of that), this callback raises at the end of the
    first epoch, listing the keys that exist. With `monitor="auto"` it picks
    the validation accuracy the model reports. The model is written to a
    temporary file and renamed, so a killed run never leaves a half-written
    checkpoint, and the best value so far is kept beside it so a resumed
    run does not overwrite a better checkpoint.

    Args:
        path: str. Where the best `.keras` model goes.
        monitor: str. A key of the epoch logs, or `"auto"` (the first
            `val_*accuracy` key). Defaults to `"auto"`.
        mode: str. `"max"` or `"min"`. Defaults to `"max"`.
    """

    def __init__(self, path, monitor="auto", mode="max"):
        super().__init__()
        if mode not in ("max", "min"):
            raise ValueError(
                "Received an invalid value for `mode`, expected 'max' or "
                f"'min'. Received: mode={mode!r}")
        self.path = path
        self.monitor = monitor
        self.mode = mode
        self._state_path = path + ".json"
        self.best = None
        self.best_epoch = None

    def on_train_begin(self, logs=None):
        if not os.path.exists(self._state_path):
            return
        try:
            state = read_json_record(self._state_path)
            best, epoch = state["best"], state["epoch"]
            monitor = state["monitor"]
        except (UnreadableRecordError, KeyError) as error:
            reason = (str(error) if isinstance(error, ValueError) else
                      f"The record {self._state_path!r} lacks {error}.")
            raise ValueError(
                f"{reason} It holds the best validation value of the "
                f"checkpoint {self.path!r}, which a resumed run compares "
                "against. Delete both files to keep the next epoch's model "
                "as the best, or pass `--fresh` to train again.") from None
        self.best, self.best_epoch, self.monitor = best, epoch, monitor

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.monitor = resolve_monitor(self.monitor, logs)
        value = float(logs[self.monitor])
        if not math.isfinite(value):
            return
        improved = self.best is None or (
            value > self.best if self.mode == "max" else value < self.best)
        if not improved:
            return
        self.best, self.best_epoch = value, epoch
        save_model_atomically(self.model, self.path)
        write_json_atomically(self._state_path, {
            "monitor": self.monitor, "best": value, "epoch": epoch})
        logging.info("Epoch %d: %s improved to %.5f, saved %s", epoch + 1,
                     self.monitor, value, self.path)


def resolve_monitor(monitor, logs):
    """The monitored key, checked against the epoch logs.

    A missing key raises, listing the keys that exist: Keras' own
    `ModelCheckpoint` only warns and never saves, which is how the official
    Efficient-CapsNet MultiMNIST run kept no checkpoint.
    """
    keys = sorted(logs)
    if monitor == "auto":
        for key in _PREFERRED_MONITORS:
            if key in logs:
                return key
        candidates = [key for key in keys
                      if key.startswith("val_") and key.endswith("accuracy")]
        if candidates:
            return candidates[0]
        raise ValueError(
            "No validation accuracy to monitor: pass validation data to "
            f"`fit` or name a `monitor`. Available keys: {keys}")
    if monitor not in logs:
        raise ValueError(
            f"The monitored metric {monitor!r} is not in the training logs. "
            f"Available keys: {keys}")
    return monitor
