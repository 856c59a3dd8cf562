"""`EpochClock`: each epoch's speed and the time left, and a time budget."""

import datetime
import logging
import statistics
import time

import keras


def _duration(seconds):
    return str(datetime.timedelta(seconds=round(seconds)))


class EpochClock(keras.callbacks.Callback):
    """Logs each epoch's images/s and the time left; with a budget, stops
    training after the epoch in which the budget ran out.

    The clock starts when the object is made (before the first `fit` of a
    run: a resumed epoch and the epochs after it are two `fit` calls). At
    each epoch's end one line is logged (`logging.info`): the epoch and
    how many, the training images of the epoch and the images per second
    over the whole epoch (its validation included, so the rate is the one
    the run's wall time sees), the time since the clock started, the time
    left at the median pace of the epochs after the first (which also
    compiles) and, with a budget, what is left of it. When the budget has
    run out at an epoch's end and epochs remain, `model.stop_training` is
    set: training stops cleanly after that epoch
    (its validation, checkpoint and backup are written) and
    `stopped_after` holds the epoch (1-based).

    Args:
        epochs: int. The epochs of the run (the last `fit`'s `epochs`).
        batch_size: int. The global batch size (images per step).
        budget: float or `None`. Seconds of training, counted from the
            clock's start; `None`: no budget.
        clock: Callable returning seconds (`time.monotonic`; a fake clock
            in tests).

    Example:

    >>> clock = EpochClock(epochs=150, batch_size=16, budget=480)
    >>> clock.record()
    {'seconds': 480, 'ran_out': False, 'stopped_after_epoch': None}
    """

    def __init__(self, epochs, batch_size, budget=None,
                 clock=time.monotonic):
        super().__init__()
        self.epochs, self.batch_size = int(epochs), int(batch_size)
        self.budget, self.clock = budget, clock
        self.started = clock()
        self.stopped_after = None
        self.last_epoch = None  # The last epoch ended (1-based).
        self.epoch_seconds = []
        self._epoch_start = None

    @property
    def ran_out(self):
        """bool. Whether the budget stopped training."""
        return self.stopped_after is not None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self.clock()

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        self.last_epoch = epoch + 1
        seconds = max(now - (self._epoch_start or now), 1e-9)
        self.epoch_seconds.append(seconds)
        images = ((self.params or {}).get("steps") or 0) * self.batch_size
        elapsed = now - self.started
        # The first epoch of a process also traces and compiles.
        pace = statistics.median(self.epoch_seconds[1:]
                                 or self.epoch_seconds)
        left = (self.epochs - self.last_epoch) * pace
        line = (f"Epoch {self.last_epoch}/{self.epochs}: {images:,} "
                f"training images in {seconds:.1f} s with validation "
                f"({images / seconds:,.0f} images/s), elapsed "
                f"{_duration(elapsed)}, about {_duration(left)} left")
        if self.budget is not None:
            line += (f", {_duration(max(self.budget - elapsed, 0))} of the "
                     f"{_duration(self.budget)} budget left")
        logging.info("%s.", line)
        if (self.budget is not None and elapsed >= self.budget
                and self.last_epoch < self.epochs):
            self.stopped_after = self.last_epoch
            self.model.stop_training = True
            logging.info(
                "The time budget of %s ran out: training stops after "
                "epoch %d of %d.", _duration(self.budget), self.last_epoch,
                self.epochs)

    def record(self):
        """The budget's entry of a run record (`None` without a budget):
        `{"seconds", "ran_out", "stopped_after_epoch"}`."""
        if self.budget is None:
            return None
        return {"seconds": self.budget, "ran_out": self.ran_out,
                "stopped_after_epoch": self.stopped_after}
