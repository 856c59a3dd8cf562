"""Train until a validation accuracy: `keras-caps train --until-accuracy`.

Sabour, Frosst & Hinton (2017, section 5.2) compare CapsNet with a CNN at
matched clean accuracy (both trained until 99.2 % on the expanded MNIST
test set, then tested on affNIST), not after a fixed number of steps: a
fixed small budget ranks how fast models learn, not where they end.
`AccuracyTarget` stops a run at the end of the first epoch whose
validation accuracy reaches the target; the recipe then selects that
epoch's model, which is also the best so far (every earlier epoch stayed
below the target).
"""

import csv
import logging
import math
import os

import keras

from keras_caps.training.best_checkpoint import resolve_monitor


class AccuracyTarget(keras.callbacks.Callback):
    """Stops training once the validation accuracy reaches `target`.

    Checked at each epoch's end on the monitored validation accuracy (the
    key `BestCheckpoint` selects on). The first epoch that reaches the
    target is kept in `reached`, and training stops there. A resumed run
    finds an epoch that reached it in the run's `history.csv` (see
    `first_epoch_reaching`) and does not train again.

    Args:
        target: float in (0, 1). The accuracy to reach.
        monitor: str. A key of the epoch logs, or `"auto"` (the validation
            accuracy the model reports). Defaults to `"auto"`.

    Example:

    ```python
    target = AccuracyTarget(0.99)
    model.fit(train, validation_data=validation, epochs=50,
              callbacks=[target])
    target.reached  # {"epoch": 12, "step": ..., "accuracy": 0.9903}
    ```
    """

    def __init__(self, target, monitor="auto"):
        super().__init__()
        self.target = float(target)
        self.monitor = monitor
        self.reached = None  # {"epoch" (1-based), "step", "accuracy"}.

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.monitor = resolve_monitor(self.monitor, logs)
        value = float(logs[self.monitor])
        if self.reached is not None or not value >= self.target:
            return
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.reached = {"epoch": epoch + 1, "step": step, "accuracy": value}
        self.model.stop_training = True
        logging.info(
            "Epoch %d: %s %.5f reached the target %.5f at step %d; training "
            "stops and this epoch's model is selected.", epoch + 1,
            self.monitor, value, self.target, step)


def first_epoch_reaching(history_path, target, before_epoch,
                         monitor="auto"):
    """The first epoch of `history.csv` whose validation accuracy reached
    `target`, among the epochs below `before_epoch` (0-based; those a
    resumed run keeps); `None` if none did.

    Args:
        history_path: str. The run's `history.csv` (`CSVLogger`'s).
        target: float. The accuracy to reach.
        before_epoch: int. Only rows of epochs `< before_epoch` count.
        monitor: str. A column, or `"auto"` (as `BestCheckpoint`).

    Returns:
        `{"epoch": <1-based>, "accuracy": <value>}` or `None`.

    Example:

    ```python
    first_epoch_reaching("runs/mnist/history.csv", 0.99, before_epoch=5)
    ```
    """
    if not os.path.exists(history_path):
        return None
    with open(history_path, newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows or "epoch" not in rows[0]:
        return None
    column = resolve_monitor(monitor, rows[0])
    for row in rows:
        epoch = row.get("epoch", "")
        if not epoch.isdigit() or int(epoch) >= before_epoch:
            continue
        try:
            value = float(row[column])
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and value >= target:
            return {"epoch": int(epoch) + 1, "accuracy": value}
    return None
