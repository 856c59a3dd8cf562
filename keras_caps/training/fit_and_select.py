"""The train-and-select stage of a run: training (or resuming) with the
recipe's callbacks, then reloading the model selected on validation.

`fit_and_select` writes, under the run's folder, `backup/`,
`checkpoints/best.keras`, `history.csv` and `logs/`, and returns the
record's entries about what ran: the selected epoch, the epochs and
steps trained, the time, the accuracy target and the execution. Where
training starts and which `fit` calls it takes is a `ResumePlan`; the
callbacks and their order are a `RecipeCallbacks`.
"""

import os
import time

import keras

from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.data_batches import batch_count
from keras_caps.training.data_batches import first_batch
from keras_caps.training.data_batches import is_tf_dataset
from keras_caps.training.data_batches import resumed_batches
from keras_caps.training.data_batches import take_batches
from keras_caps.training.data_epoch import DataEpoch
from keras_caps.training.data_epoch import follows_epochs
from keras_caps.training.epoch_clock import EpochClock
from keras_caps.training.recipe_callbacks import make_recipe_callbacks
from keras_caps.training.resumable_backup import ResumableBackup
from keras_caps.training.resume_plan import ResumePlan
from keras_caps.training.step_timer import peak_memory_mb


def fit_and_select(network, splits, settings, work_dir, execution):
    """Trains (or resumes) and reloads the best weights on validation.

    Returns the record's entries about selection, steps and time.
    """
    os.makedirs(work_dir, exist_ok=True)
    checkpoint = BestCheckpoint(
        os.path.join(work_dir, "checkpoints", "best.keras"))
    backup = ResumableBackup(os.path.join(work_dir, "backup"),
                             save_freq=execution["backup_frequency"])
    clock = EpochClock(settings.epochs, settings.batch_size,
                       budget=execution["time_budget"])
    callbacks = make_recipe_callbacks(settings, work_dir, checkpoint,
                                      backup, clock)
    train_batches = batch_count(splits["train"])
    steps_per_epoch = settings.steps_per_epoch or (
        train_batches if train_batches else None)
    plan = ResumePlan.from_backup(
        backup, network, steps_per_epoch=steps_per_epoch,
        epochs=settings.epochs, target=callbacks.target, work_dir=work_dir)
    if (execution["input_workers"] or 1) > 1:
        _build_compiled_state(network, splits["train"])
    start = time.time()
    for stage in plan.stages:
        if callbacks.stopped_training():
            break
        _fit_stage(network, splits, settings, callbacks,
                   execution["verbose"], stage)
    train_seconds = time.time() - start
    total_steps = int(keras.ops.convert_to_numpy(
        network.optimizer.iterations))
    if os.path.exists(checkpoint.path):
        network.load_weights(checkpoint.path)  # The selected model.
    return {
        "selected_epoch": (None if checkpoint.best_epoch is None
                           else checkpoint.best_epoch + 1),
        "monitor": checkpoint.monitor,
        "best_validation": checkpoint.best,
        # What ran: the epochs trained in all (fewer than `epochs` when a
        # target or the time budget stopped them), each epoch's steps
        # (`None` when the data's length is unknown and no limit was set),
        # the steps this process ran (a resumed run: the rest), and the
        # optimizer's steps in all.
        "epochs_trained": clock.last_epoch or plan.epoch,
        "train_steps_per_epoch": steps_per_epoch,
        "train_steps_this_run": backup.steps_this_run,
        "train_steps_total": total_steps,
        "train_seconds_this_run": round(train_seconds, 1),
        **_target_record(callbacks.target, plan.reached_before,
                         steps_per_epoch),
        **_execution_record(execution, splits["train"], clock),
        # This process's training batches without the warm-up steps, and
        # its peak resident memory (framework runtime included).
        **callbacks.step_timer.record(),
        "peak_memory_mb": peak_memory_mb(),
    }


def _build_compiled_state(network, train):
    """Builds the compiled loss and metrics from the first training batch,
    read directly, before `fit`.

    Otherwise `fit` builds them from a batch drawn through its iterator
    of the data and then stops it: with `PyDataset` workers, the batches
    they made ahead are then served first in the next epoch, and every
    epoch's batches shift (so that they would differ from one worker's).
    """
    if hasattr(network, "_symbolic_build"):  # Keras 3's trainers.
        network._symbolic_build(data_batch=first_batch(train))


def _fit_stage(network, splits, settings, callbacks, verbose, stage):
    """`fit` of one `FitStage` of the `ResumePlan`, with the
    `RecipeCallbacks` `callbacks`.

    With steps done, the epoch runs only its remaining steps: the training
    data skips the batches done, and `fit` runs that one epoch (on
    exactly those batches when the steps left are not a multiple of the
    model's `steps_per_execution`: Keras would run its last call in full
    on repeated data).
    """
    epoch, done = stage.first_epoch, stage.steps_done
    callbacks.backup.start(epoch, done)
    steps = settings.steps_per_epoch
    train = resumed_batches(splits["train"], epoch, done, steps)
    data_epoch = (DataEpoch(splits["train"])
                  if follows_epochs(splits["train"]) else None)
    if steps is not None:
        steps -= done
    if steps is not None and steps % network.steps_per_execution:
        train, steps = take_batches(train, steps), None
    network.fit(train,
                validation_data=splits["validation"],
                epochs=stage.end_epoch, initial_epoch=epoch,
                steps_per_epoch=steps,
                callbacks=callbacks.in_call_order(epoch, data_epoch),
                verbose=verbose,
                shuffle=False)  # The pipeline shuffles each epoch.


def _execution_record(execution, train, clock):
    """What the record says of how the run was executed: steps per call,
    the input pipeline and its workers, and the time budget (if any)."""
    record = {"steps_per_execution": execution["steps_per_execution"],
              "input_pipeline": ("tf_data" if is_tf_dataset(train)
                                 else "numpy"),
              "input_workers": execution["input_workers"]}
    if clock.budget is not None:
        record["time_budget"] = clock.record()
    return record


def _target_record(target, reached_before, steps_per_epoch):
    """`{"until_accuracy": ...}` of the record: the target, whether and
    where it was reached (`{}` without a target)."""
    if target is None:
        return {}
    reached = target.reached
    if reached is None and reached_before is not None:
        # Reached in an earlier process: its step from the epoch's length.
        reached = {**reached_before, "step": None if steps_per_epoch is None
                   else reached_before["epoch"] * steps_per_epoch}
    record = {"target": target.target, "reached": reached is not None,
              "epoch": None, "step": None, "accuracy": None}
    if reached is not None:
        record.update(epoch=reached["epoch"], step=reached["step"],
                      accuracy=reached["accuracy"])
    return {"until_accuracy": record}
