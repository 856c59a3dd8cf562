"""`ResumePlan` names the `fit` calls of a run, and `RecipeCallbacks` the
order Keras calls the recipe's callbacks in (no list positions, nothing
set on the model)."""

import keras

from keras_caps.training.accuracy_target import AccuracyTarget
from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.epoch_clock import EpochClock
from keras_caps.training.history_trim import HistoryTrim
from keras_caps.training.recipe_callbacks import RecipeCallbacks
from keras_caps.training.resumable_backup import ResumableBackup
from keras_caps.training.resume_plan import FitStage
from keras_caps.training.resume_plan import ResumePlan
from keras_caps.training.step_timer import SteadyStepTimer


def test_a_new_run_trains_its_epochs_in_one_stage():
    plan = ResumePlan(epoch=0, steps_done=0, epochs=5)
    assert plan.rest_of_epoch is None
    assert plan.stages == (FitStage("the whole epochs", 0, 0, 5),)


def test_a_run_resumed_mid_epoch_finishes_that_epoch_first():
    plan = ResumePlan(epoch=2, steps_done=7, epochs=5)
    assert [(stage.first_epoch, stage.steps_done, stage.end_epoch)
            for stage in plan.stages] == [(2, 7, 3), (3, 0, 5)]
    assert plan.rest_of_epoch.name == "the rest of the interrupted epoch"


def test_a_run_whose_target_was_reached_before_trains_no_more():
    plan = ResumePlan(epoch=3, steps_done=0, epochs=5,
                      reached_before={"epoch": 2, "accuracy": 0.95})
    assert plan.stages == ()


class _Backup:
    def __init__(self, position):
        self.position = position

    def restore(self, network):
        return self.position


def test_the_plan_starts_after_an_epoch_whose_steps_are_all_done(tmp_path):
    plan = ResumePlan.from_backup(_Backup((1, 6)), None, steps_per_epoch=6,
                                  epochs=4)
    assert (plan.epoch, plan.steps_done, plan.reached_before) == (2, 0, None)
    plan = ResumePlan.from_backup(_Backup((1, 4)), None, steps_per_epoch=6,
                                  epochs=4)
    assert (plan.epoch, plan.steps_done) == (1, 4)
    # With a target, `history.csv` says whether it was reached before.
    (tmp_path / "history.csv").write_text(
        "epoch,val_accuracy\n0,0.5\n1,0.93\n")
    plan = ResumePlan.from_backup(
        _Backup((2, 0)), None, steps_per_epoch=None, epochs=4,
        target=AccuracyTarget(0.9), work_dir=str(tmp_path))
    assert plan.reached_before == {"epoch": 2, "accuracy": 0.93}


def test_the_callbacks_are_called_in_their_stated_order(tmp_path):
    folder = str(tmp_path)
    logs = keras.callbacks.CSVLogger(f"{folder}/history.csv", append=True)
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch: 0.1)
    callbacks = RecipeCallbacks(
        schedules=(schedule,), history_path=f"{folder}/history.csv",
        checkpoint=BestCheckpoint(f"{folder}/best.keras"), logs=(logs,),
        backup=ResumableBackup(f"{folder}/backup", 10),
        target=AccuracyTarget(0.9), clock=EpochClock(3, 8),
        step_timer=SteadyStepTimer())
    data_epoch = keras.callbacks.Callback()
    ordered = callbacks.in_call_order(2, data_epoch)
    trim = ordered[2]
    assert isinstance(trim, HistoryTrim) and trim.first_epoch == 2
    assert ordered == [
        callbacks.step_timer, schedule, trim, callbacks.checkpoint, logs,
        callbacks.target, callbacks.clock, data_epoch, callbacks.backup]
    assert not callbacks.stopped_training()
    callbacks.target.reached = {"epoch": 1, "step": 3, "accuracy": 0.95}
    assert callbacks.stopped_training()
