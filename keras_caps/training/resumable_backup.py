"""Crash-recovery backups that resume a run at the step where it stopped.

Keras 3's `BackupAndRestore` with an integer `save_freq` saves only every
`save_freq` steps (never at an epoch's end), and restores only the epoch:
a run killed after a short epoch retrains from scratch, and one resumed
from a mid-epoch backup trains that epoch again in full from the mid-epoch
weights (14 optimizer steps for a 10-step epoch). `ResumableBackup` saves
at the end of every epoch too, records how many steps of the current epoch
are done, and `restore` reports them so that the trainer runs only the
remaining steps of that epoch (see
`keras_caps.training.resume_plan`).
"""

import contextlib
import json
import logging
import os
import shutil
import signal
import threading

import keras

from keras_caps.runs.atomic_files import write_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.training.execution_options import steps_in_call

_WEIGHTS = "latest.weights.h5"
_METADATA = "training_metadata.json"
_PREVIOUS = ".bkp"  # Keras' suffix for the previous backup.


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that saves at each epoch's end and every
    `save_freq` steps, and resumes mid-epoch without repeating steps.

    The backup folder keeps Keras' layout (`latest.weights.h5`,
    `training_metadata.json` and the previous pair as `.bkp`), so backups
    written by `BackupAndRestore` still resume (at their epoch's start, as
    Keras would). The metadata adds `steps_done_in_epoch` and the
    optimizer's `iterations` at the save, which tells a torn pair (a kill
    between the weights and the metadata) from a whole one: a torn latest
    pair falls back to the previous one.

    Call `restore(model)` before `fit` (it loads the weights and returns
    where training stopped), then `start(epoch, steps_done)` before each
    `fit`: the callback itself never loads anything in `on_train_begin`.

    Args:
        backup_dir: str. The backup folder.
        save_freq: int. Steps between backups within an epoch.

    The folder is kept when `fit` ends: its owner deletes it once the run
    no longer needs it (a resume may take several `fit` calls).

    Example:

    ```python
    backup = ResumableBackup("run/backup", save_freq=500)
    epoch, done = backup.restore(model)
    backup.start(epoch, done)
    model.fit(data.skip(done), initial_epoch=epoch, epochs=epoch + 1,
              callbacks=[backup])
    ```
    """

    def __init__(self, backup_dir, save_freq):
        super().__init__(backup_dir, save_freq=save_freq,
                         double_checkpoint=True, delete_checkpoint=False)
        self._epoch = 0
        self._offset = 0  # Steps of the epoch done before this `fit`.
        self._done = 0  # Steps of the current epoch done.
        self._since_save = 0
        self.steps_this_run = 0  # Training steps this process ran.

    def restore(self, model):
        """Loads the latest whole backup into `model`.

        Returns:
            `(epoch, steps_done)`: the epoch to resume and how many of its
            steps are done (`(0, 0)` without a backup).
        """
        self.set_model(model)
        if not any(os.path.exists(path) for path in (
                self._weights_path, self._prev_weights_path)):
            return 0, 0
        # The latest pair, the previous one, and the previous weights with
        # the latest metadata (a kill between the two renames of a save).
        for weights, metadata in (
                (self._weights_path, self._training_metadata_path),
                (self._prev_weights_path,
                 self._prev_training_metadata_path),
                (self._prev_weights_path, self._training_metadata_path)):
            position = self._load_pair(model, weights, metadata)
            if position is not None:
                logging.info("Resuming from the backup in %s: epoch %d, "
                             "after %d of its steps.", self.backup_dir,
                             position[0] + 1, position[1])
                return position
        raise ValueError(
            f"The backup in {self.backup_dir!r} cannot be restored: "
            "neither its latest nor its previous weights can be read, or "
            "they do not match their metadata. Delete that folder to "
            "restart training from the run's start (or pass `--fresh`).")

    def _load_pair(self, model, weights, metadata):
        """`(epoch, steps_done)` after loading a whole pair, else `None`."""
        if not os.path.exists(weights) or not os.path.exists(metadata):
            return None
        try:
            with open(metadata, encoding="utf-8") as file:
                state = json.load(file)
            if not isinstance(state, dict):
                raise ValueError(f"{metadata!r} is not a JSON object")
            position = (int(state["epoch"]),
                        int(state.get("steps_done_in_epoch", 0)))
            if model.optimizer is not None and not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            _load_weights(model, weights)
        # A torn or truncated file: h5py raises `KeyError` for a missing
        # object, as the metadata does for a missing field.
        except (OSError, ValueError, KeyError, TypeError) as error:
            logging.warning("The backup %s is unreadable (%s: %s).",
                            weights, type(error).__name__, error)
            return None
        recorded = state.get("iterations")
        if recorded is not None and recorded != _iterations(model):
            logging.warning("The backup %s does not match %s (killed "
                            "between the two writes).", weights, metadata)
            return None
        return position

    def start(self, epoch, steps_done):
        """The next `fit` starts at step `steps_done` of `epoch`."""
        self._epoch, self._offset, self._done = epoch, steps_done, steps_done
        self._since_save = 0

    def on_train_begin(self, logs=None):
        pass  # `restore` loaded the backup before `fit`.

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._done = self._offset

    def on_train_batch_begin(self, batch, logs=None):
        self._batch_begin = batch

    def on_train_batch_end(self, batch, logs=None):
        # With `steps_per_execution`, one call of several steps; the last
        # call of an epoch may run fewer than Keras reports.
        begin = getattr(self, "_batch_begin", batch)
        steps = steps_in_call(begin, batch, self.params)
        batch = begin + steps - 1
        self.steps_this_run += steps
        self._done = self._offset + batch + 1
        self._since_save += steps
        # The epoch's last step is saved by `on_epoch_end`, after the
        # epoch's validation and logs. Data of unknown length (no
        # `params["steps"]`) would also be saved after its last step, and a
        # kill before `on_epoch_end` would then resume at the next epoch
        # without this one's validation: the recipe's training data always
        # has a known length (`tf.data` cardinality: in-memory arrays, and
        # TFDS splits and multi_mnist assert theirs), so `fit` sees none.
        steps_in_fit = (self.params or {}).get("steps")
        last = batch + 1 == steps_in_fit
        if self._since_save >= self.save_freq and not last:
            self._save(self._epoch, self._done)

    def on_epoch_end(self, epoch, logs=None):
        self._offset = 0  # Only the first epoch of a `fit` is partial.
        self._save(epoch + 1, 0)

    def _save(self, epoch, steps_done):
        """Rotates the latest pair to the previous one and writes the new
        pair, each file through a temporary name, with a Ctrl-C held until
        both are written: an interrupt never leaves a half-written backup
        (a kill may still fall between the two files; `restore` then takes
        the previous pair)."""
        self._since_save = 0
        os.makedirs(self.backup_dir, exist_ok=True)
        with _interrupt_held():
            for latest, previous in (
                    (self._weights_path, self._prev_weights_path),
                    (self._training_metadata_path,
                     self._prev_training_metadata_path)):
                if os.path.exists(latest):
                    os.replace(latest, previous)
            write_atomically(self._weights_path, self.model.save_weights)
            write_json_atomically(self._training_metadata_path, {
                "epoch": epoch, "steps_done_in_epoch": steps_done,
                "iterations": _iterations(self.model)})


@contextlib.contextmanager
def _interrupt_held():
    """Holds a SIGINT (Ctrl-C) that arrives inside the block and delivers
    it, to the handler in place before, when the block ends (in the main
    thread only, where Python runs signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT,
                             lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)


def _load_weights(model, path):
    """`model.load_weights(path)`, also for the previous backup, whose
    `.bkp` suffix Keras refuses: it is read through a copy."""
    if path.endswith(".weights.h5"):
        model.load_weights(path)
        return
    copy = os.path.join(os.path.dirname(path),
                        f".tmp-{os.getpid()}-previous.weights.h5")
    try:
        shutil.copyfile(path, copy)
        model.load_weights(copy)
    finally:
        if os.path.exists(copy):
            os.remove(copy)


def _iterations(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))
