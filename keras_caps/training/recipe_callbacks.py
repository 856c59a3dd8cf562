"""The callbacks of a training run, by role, and the order Keras calls
them in: `RecipeCallbacks`.

Keras calls a `fit`'s callbacks in list order at every hook, so the
order carries the recipe's invariants (an epoch's backup follows its
checkpoint and logs, the logs hold the epoch's schedules, ...).
`RecipeCallbacks` names each callback by its role, and
`RecipeCallbacks.in_call_order` alone says (and documents) the order.
"""

import dataclasses
import os

import keras

from keras_caps.applications import MODELS
from keras_caps.callbacks import RoutingTemperatureScheduler
from keras_caps.schedules import ExponentialTemperatureDecay
from keras_caps.training.accuracy_target import AccuracyTarget
from keras_caps.training.backend_runtime import logs_callbacks
from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.epoch_clock import EpochClock
from keras_caps.training.history_trim import HistoryTrim
from keras_caps.training.resumable_backup import ResumableBackup
from keras_caps.training.step_timer import SteadyStepTimer


@dataclasses.dataclass(frozen=True)
class RecipeCallbacks:
    """The callbacks of a run, by role (one object for all its `fit`s).

    Attributes:
        schedules: tuple of callbacks setting each epoch's
            hyperparameters: the family's own (e.g. MatrixCapsNet's
            spread-loss margin), the learning rate, the routing
            temperature.
        history_path: str. `history.csv`, the CSV log's file, which each
            `fit` trims of the epochs it trains again (`HistoryTrim`).
        checkpoint: `BestCheckpoint`. The best model on validation.
        logs: tuple. The CSV log (`history.csv`) and the TensorBoard
            logs (where they can be written).
        backup: `ResumableBackup`. The crash-recovery backup.
        target: `AccuracyTarget` or `None`. `--until-accuracy`.
        clock: `EpochClock` or `None`. Each epoch's speed, the time
            budget.
        step_timer: `SteadyStepTimer` or `None`. The steady step time.
    """

    schedules: tuple
    history_path: str
    checkpoint: BestCheckpoint
    logs: tuple
    backup: ResumableBackup
    target: AccuracyTarget | None = None
    clock: EpochClock | None = None
    step_timer: SteadyStepTimer | None = None

    def in_call_order(self, first_epoch, data_epoch=None):
        """The callbacks of one `fit` from `first_epoch`, in the order
        Keras must call them:

        1. the step timer: its batch end reads the time before any other
           callback's (the backup's saves within an epoch) runs;
        2. the schedules: they set each epoch's learning rate and routing
           temperature and add them to the epoch's logs, which the logs
           below then write;
        3. `HistoryTrim(first_epoch)`: it drops the rows of the epochs
           this `fit` trains again before the CSV log opens the file;
        4. the best checkpoint, then the logs: an epoch's row is written
           once its checkpoint is;
        5. the accuracy target, then the clock: their stop follows the
           epoch's checkpoint and logs, and the clock's epoch time counts
           the work of every callback before it;
        6. `data_epoch` (a `DataEpoch`, for data whose batches follow the
           training epoch), if any;
        7. the backup, last: an epoch's backup is written once its
           validation, checkpoint and logs are, so a run resumed from it
           never lacks them.

        Args:
            first_epoch: int. The epoch (0-based) the `fit` starts at.
            data_epoch: `DataEpoch` or `None`.
        """
        optional = (self.target, self.clock, data_epoch)
        return [
            *(() if self.step_timer is None else (self.step_timer,)),
            *self.schedules,
            HistoryTrim(self.history_path, first_epoch=first_epoch),
            self.checkpoint,
            *self.logs,
            *(callback for callback in optional if callback is not None),
            self.backup,
        ]

    def stopped_training(self):
        """Whether the accuracy target or the clock's time budget stopped
        training (no later `fit` of the run is to start)."""
        return ((self.target is not None and self.target.reached is not None)
                or (self.clock is not None and self.clock.ran_out))


def make_recipe_callbacks(settings, work_dir, checkpoint, backup, clock):
    """The `RecipeCallbacks` of a run of `settings` in `work_dir`: its
    schedules and logs, `checkpoint`, `backup` and `clock`, an accuracy
    target (with `until_accuracy`) and a new step timer."""
    family = MODELS[settings.model].family
    callbacks = _run_callbacks(
        work_dir, checkpoint, backup,
        family.learning_rate_schedule(settings.preset_name()),
        _schedule_config(settings))
    family_schedules = () if family.recipe_callbacks is None else tuple(
        family.recipe_callbacks(settings.preset_name(), settings.epochs))
    target = None
    if settings.until_accuracy is not None:
        target = AccuracyTarget(settings.until_accuracy)
    return dataclasses.replace(
        callbacks, schedules=family_schedules + callbacks.schedules,
        target=target, clock=clock, step_timer=SteadyStepTimer())


def _run_callbacks(work_dir, checkpoint, backup, schedule,
                   routing_temperature=None):
    """The `RecipeCallbacks` of the learning-rate `schedule` (or `None`),
    the `routing_temperature` decay's config (or `None`), the run's logs
    in `work_dir`, `checkpoint` and `backup` (no target, clock or step
    timer)."""
    schedules = () if schedule is None else (
        keras.callbacks.LearningRateScheduler(schedule),)
    if routing_temperature is not None:
        schedules += (RoutingTemperatureScheduler(
            ExponentialTemperatureDecay(**routing_temperature)),)
    history_path = os.path.join(work_dir, "history.csv")
    logs = (keras.callbacks.CSVLogger(history_path, append=True),
            *logs_callbacks(os.path.join(work_dir, "logs")))
    return RecipeCallbacks(schedules=schedules, history_path=history_path,
                           checkpoint=checkpoint, logs=logs, backup=backup)


def _schedule_config(settings):
    """The config of the routing temperature's decay (`None` without)."""
    schedule = settings.temperature_schedule()
    return None if schedule is None else schedule.get_config()
