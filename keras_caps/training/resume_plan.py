"""Where a run's training starts, and the `fit` calls ("stages") that
take it to its last epoch: `ResumePlan`.

A new run trains its epochs in one `fit` call. A run resumed from its
backup (`ResumableBackup`, written at each epoch's end and every
`backup_frequency` steps) trains in up to two: the rest of the epoch the
crash interrupted (only the steps the backup does not hold), then the
whole epochs after it. A run whose accuracy target was reached in an
earlier process (`history.csv` says so) does not train again.
"""

import dataclasses
import logging
import os

from keras_caps.training.accuracy_target import first_epoch_reaching
from keras_caps.training.history_trim import trim_history


@dataclasses.dataclass(frozen=True)
class FitStage:
    """One `fit` call of a run.

    Attributes:
        name: str. What the stage trains, for logs and errors.
        first_epoch: int. The epoch (0-based) `fit` starts at (its
            `initial_epoch`).
        steps_done: int. Steps of `first_epoch` done before this stage:
            it runs only the others.
        end_epoch: int. `fit`'s `epochs`: the stage ends before this
            epoch (0-based), i.e. after `end_epoch` epochs in all.
    """

    name: str
    first_epoch: int
    steps_done: int
    end_epoch: int


@dataclasses.dataclass(frozen=True)
class ResumePlan:
    """Where a run's training starts and the stages that train the rest.

    Attributes:
        epoch: int. The epoch (0-based) training starts at: 0 for a new
            run; for a resumed run, the backup's (the next one when the
            backup holds all of its steps).
        steps_done: int. The steps of `epoch` done in earlier processes
            (0 unless resumed mid-epoch).
        epochs: int. The run's epochs: the last stage ends there.
        reached_before: dict or `None`. The epoch (before `epoch`) whose
            validation accuracy reached the run's target in an earlier
            process (`{"epoch": <1-based>, "accuracy"}`, from
            `history.csv`): such a run does not train again.

    Example:

    >>> plan = ResumePlan(epoch=2, steps_done=7, epochs=5)
    >>> [(stage.first_epoch, stage.steps_done, stage.end_epoch)
    ...  for stage in plan.stages]
    [(2, 7, 3), (3, 0, 5)]
    """

    epoch: int
    steps_done: int
    epochs: int
    reached_before: dict | None = None

    @classmethod
    def from_backup(cls, backup, network, *, steps_per_epoch, epochs,
                    target=None, work_dir=None):
        """Loads the latest whole backup into `network` (none: a new run)
        and plans the rest of the run.

        Args:
            backup: `ResumableBackup` of the run.
            network: The compiled model, loaded from the backup.
            steps_per_epoch: int or `None` (unknown). An epoch whose steps
                the backup holds in full is done.
            epochs: int. The run's epochs.
            target: `AccuracyTarget` or `None`. With a target, the run's
                `history.csv` (in `work_dir`) tells whether an earlier
                process reached it.
            work_dir: str. The folder holding `history.csv`.
        """
        epoch, done = backup.restore(network)
        if steps_per_epoch is not None and done >= steps_per_epoch:
            epoch, done = epoch + 1, 0
        return cls(epoch, done, epochs,
                   _target_reached_before(target, work_dir, epoch))

    @property
    def rest_of_epoch(self):
        """The stage that finishes the interrupted epoch (its steps not
        done), or `None` when training starts at an epoch's start."""
        if not self.steps_done:
            return None
        return FitStage("the rest of the interrupted epoch", self.epoch,
                        self.steps_done, self.epoch + 1)

    @property
    def whole_epochs(self):
        """The stage of the whole epochs after `rest_of_epoch` (from
        `epoch` when there is none) up to `epochs`."""
        first = self.epoch + 1 if self.steps_done else self.epoch
        return FitStage("the whole epochs", first, 0, self.epochs)

    @property
    def stages(self):
        """The stages to run, in order: none when the target was reached
        before; else `rest_of_epoch` (if any), then `whole_epochs`. A
        stage after one that stopped training (the accuracy target or
        the time budget) is not run."""
        if self.reached_before:
            return ()
        return tuple(stage for stage in (self.rest_of_epoch,
                                         self.whole_epochs)
                     if stage is not None)


def _target_reached_before(target, work_dir, epoch):
    """The epoch (before `epoch`, where a resumed run starts) that reached
    the target in an earlier process, from `history.csv`; else `None`.
    Such a run does not train again: the rows of later epochs (trained
    after the backup this run resumes from) are dropped."""
    if target is None:
        return None
    history_path = os.path.join(work_dir, "history.csv")
    reached = first_epoch_reaching(history_path, target.target, epoch)
    if reached is not None:
        trim_history(history_path, epoch)
        logging.info("The validation accuracy reached the target %.5f at "
                     "epoch %d in an earlier process: not training again.",
                     target.target, reached["epoch"])
    return reached
