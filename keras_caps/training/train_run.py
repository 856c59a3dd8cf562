"""`train`: the training recipe behind `keras-caps train`, and its chief
and worker processes.

One run writes, under its output folder (and owns only these names):

- `run.json`: the run's settings and how far it got (see `RunFolder`): a
  rerun with other settings is refused, one with the same settings
  resumes, or finishes what is missing, or (once complete) does nothing;
- `run.lock`: held while the run lives (see `RunLock`);
- `backup/`: the crash-recovery backup (`ResumableBackup`), written at
  each epoch's end and every `backup_frequency` steps, kept until every
  artifact below is written; running the same command again after a crash
  resumes from it at the step it records, without repeating a step;
- `checkpoints/best.keras` (+ `.json`): the best model on the validation
  metric, written atomically;
- `history.csv` and `logs/` (TensorBoard), with the learning rate and,
  when annealed, the routing temperature of each epoch;
- `model.keras`: the selected (best-on-validation) model;
- `class_names.json` (beside `model.keras` and `checkpoints/best.keras`;
  a dataset a user brings only): the class names, in class-index order;
- `export/`: the SavedModel of the inference graph, raw images in;
- `metrics.json`: test metrics labelled with protocol, hardware, precision
  and epochs (with smallNORB's `viewpoints`, also `test_familiar` and
  `test_novel`: the test images of the familiar and the novel viewpoints).

A run's stages, each in its module: the refusals and the folder's state
(`run_progress`), build (`model_building`), train or resume, then select
on validation (`fit_and_select`, with `resume_plan` and
`recipe_callbacks`), then the artifacts (`run_artifacts`). `evaluate` is
in `run_evaluation`.
"""

import dataclasses
import json
import logging
import os
import shutil

import keras

from keras_caps.datasets.viewpoints import TEST_SPLITS as VIEWPOINT_TEST_SPLITS
from keras_caps.inference.class_names import CLASS_NAMES_FILE
from keras_caps.inference.class_names import write_class_names
from keras_caps.runs import check_export_target
from keras_caps.runs.run_folder import RunFolder
from keras_caps.runs.run_folder import check_output_folder
from keras_caps.runs.run_folder import empty_new_folders_removed_on_error
from keras_caps.runs.run_lock import RunLock
from keras_caps.training.backend_check import check_backend
from keras_caps.training.backend_distribution import check_batch_divides
from keras_caps.training.backend_distribution import check_strategy_supported
from keras_caps.training.backend_runtime import enable_determinism
from keras_caps.training.backend_runtime import training_scope
from keras_caps.training.execution_options import check_input_workers
from keras_caps.training.execution_options import check_steps_per_execution
from keras_caps.training.execution_options import check_time_budget
from keras_caps.training.fit_and_select import fit_and_select
from keras_caps.training.model_building import build_model_and_splits
from keras_caps.training.run_artifacts import class_names
from keras_caps.training.run_artifacts import environment
from keras_caps.training.run_artifacts import reload_trained
from keras_caps.training.run_artifacts import split_metrics
from keras_caps.training.run_artifacts import training_kept
from keras_caps.training.run_artifacts import write_artifacts
from keras_caps.training.run_progress import current_settings
from keras_caps.training.run_progress import finished_run
from keras_caps.training.run_progress import record_backend
from keras_caps.training.run_progress import run_settings
from keras_caps.training.strategy import DEFAULT_WORKER_TIMEOUT
from keras_caps.training.strategy import get_strategy
from keras_caps.training.strategy import is_chief
from keras_caps.training.strategy import task_name
from keras_caps.training.training_settings import TrainingSettings
from keras_caps.training.user_data import read_user_data
from keras_caps.training.user_data import refuse_read_options

# The fields `train` takes as keyword arguments, besides `model` and
# `dataset`:
_SETTING_FIELDS = [field.name for field in dataclasses.fields(
    TrainingSettings) if field.name not in ("model", "dataset")]


def train(model=None, dataset=None, *, output_dir, settings=None,
          strategy="auto", data_dir=None, backup_frequency=500,
          verbose="auto", fresh=False, worker_timeout=DEFAULT_WORKER_TIMEOUT,
          download=True, image_size=None, color_mode=None, test_dir=None,
          test_share=None, steps_per_execution=1, input_workers=None,
          time_budget=None, **setting_fields):
    """Trains, selects on validation, tests, saves and exports one model.

    The output folder belongs to one run: its settings (everything that
    changes the result, a `TrainingSettings`) are recorded in `run.json`.
    Called again with the same settings, `train` resumes where the run
    stopped (mid-epoch from the backup, or at the first missing artifact
    after training) and, once the run is complete, does nothing but return
    its `metrics.json`. Other settings raise a `ValueError` listing the
    differences, unless `fresh=True`. A second process on the same folder
    raises `FolderInUseError` at once. Everything that can refuse a run
    (the backend, which must be TensorFlow, JAX or PyTorch, a strategy
    the backend does not have, the settings, the data, the model and its
    options) is checked before the folder is claimed, so a refused call
    writes nothing there; a new folder claimed before a refusal that only
    loading the data can make (a TFDS dataset that is not prepared) is
    removed again. On JAX and PyTorch, see `check_backend` for
    what differs.

    A dataset a user brings (`dataset="folder:PATH"`, `"npz:PATH"` or
    `"tfds:NAME"`, see `keras_caps.datasets.user_data.user_dataset`) is read and
    checked first; the model is the family's builder on `preset` (the
    closest by input size by default) with the data's `input_shape` and
    `num_classes`; the settings record the data's source record (content
    fingerprint included, so changed data is refused on resume), the
    preset and the augmentation; `class_names.json` is written beside the
    model and the best checkpoint, and into the export.

    Args:
        model: str. A key of `keras_caps.applications.MODELS`. Defaults to
            `"efficient_capsnet"`.
        dataset: str. A key of `keras_caps.datasets.DATASETS`, or a
            dataset a user brings (`"folder:PATH"`, `"npz:PATH"`,
            `"tfds:NAME"`). Defaults to `"mnist"`.
        output_dir: str. Folder for checkpoints, logs, model and export.
        settings: `TrainingSettings`. Everything that changes the result.
            Defaults to `TrainingSettings(model, dataset, **setting_fields)`;
            pass either `settings` or those arguments.
        strategy: str. See `keras_caps.training.strategy.get_strategy`.
        data_dir: str. Folder with the raw dataset files; `None` uses
            `KERAS_CAPS_DATA_DIR` or TFDS.
        backup_frequency: int. Steps between crash-recovery backups
            within an epoch (one is also written at each epoch's end).
        verbose: Keras `fit` verbosity.
        fresh: bool. Delete what an earlier run wrote in `output_dir` (only
            the files a run writes, see `RUN_FILES`) and train from scratch.
        worker_timeout: float. Seconds the `multi_worker` strategy waits
            for the other workers to start.
        download: bool. Let TFDS download a dataset that is not prepared
            (see `keras_caps.datasets.load`). Defaults to `True`.
        image_size: int, `(height, width)` or `None`. A dataset a user
            brings: resize its images (default: their own size).
        color_mode: `"grayscale"`, `"rgb"` or `None`. A dataset a user
            brings: convert its images (default: as stored).
        test_dir: str or `None`. `folder:` data: a folder of the same
            classes holding the test images.
        test_share: float or `None`. `folder:` data without `test_dir`:
            the share of each class held out for testing (0.2).
        steps_per_execution: int. Optimizer steps per call of the
            compiled training function (`compile`'s), for accelerators
            where the host's work per step would dominate. The same steps
            as 1 (the epoch's last call runs only what is left; the
            learning rate changes per epoch); callbacks see one call per N
            steps, so backups within an epoch land at the end of a call.
            Refused on PyTorch, with an annealed routing temperature and
            with a `steps_per_epoch` it does not divide. Defaults to `1`.
        input_workers: int or `None`. Threads of the NumPy input pipeline
            (`keras.utils.PyDataset`'s `workers`; built-in mnist,
            fashion_mnist, multi_mnist off TensorFlow). The batches do not
            depend on it. `None`: Keras' default (1, in the training
            thread).
        time_budget: float or `None`. Seconds of training (from the start
            of this process's training): training stops after the epoch
            in which they ran out, the selected model is the best of the
            epochs trained, and the record's `time_budget` says so
            (`ran_out`, `stopped_after_epoch`). A run stopped so is
            complete; `fresh=True` trains it again. Not with the
            `multi_worker` strategy.
        **setting_fields: The other fields of `TrainingSettings`: `epochs`,
            `batch_size`, `steps_per_epoch` (at most the number of training
            batches in one epoch), `precision`, `seed`, `validation`,
            `reconstruction`, `deterministic`, `dataset_options`,
            `routing_temperature`, `temperature_decay`, `min_temperature`,
            `until_accuracy` (train until the validation accuracy reaches
            it, at most `epochs`; the record's `until_accuracy` says
            whether and at which epoch and step it was reached, and the
            selected model is that first epoch's) and, for a dataset a
            user brings, `preset` (see `TrainingSettings`).

    Returns:
        The metrics record written to `metrics.json`: the settings'
        `to_record()`, then what ran (with `epochs_trained`,
        `steps_per_execution`, `input_pipeline`, `input_workers` and, with
        a budget, `time_budget`), the test metrics and the hardware.

    Example:

    ```python
    record = train("efficient_capsnet", "mnist", output_dir="runs/mnist",
                   epochs=3, data_dir="data/mnist")
    # The same, with the settings as one value:
    settings = TrainingSettings("efficient_capsnet", "mnist", epochs=3)
    record = train(output_dir="runs/mnist", settings=settings,
                   data_dir="data/mnist")
    ```
    """
    settings = _requested_settings(settings, model, dataset, setting_fields)
    execution = {
        "steps_per_execution": check_steps_per_execution(
            steps_per_execution, settings),
        "input_workers": check_input_workers(input_workers, settings),
        "time_budget": check_time_budget(time_budget, strategy),
        "backup_frequency": backup_frequency, "verbose": verbose,
        "download": download}
    read_options = {"image_size": image_size, "color_mode": color_mode,
                    "test_dir": test_dir, "test_share": test_share}
    user_data = None
    if settings.is_user_data():
        check_backend()  # Before reading the data: it may take a while.
        check_strategy_supported(strategy)
        user_data, settings = read_user_data(
            settings, read_options, data_dir=data_dir, download=download)
    else:
        refuse_read_options(settings.dataset, read_options)
    settings = settings.resolve()
    check_backend()
    check_strategy_supported(strategy)
    # A file, or a folder this user cannot write, fails before anything.
    check_output_folder(output_dir)
    keras.utils.set_random_seed(settings.seed)
    if settings.deterministic:
        enable_determinism()
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(settings.precision)
    try:
        # A run refused after claiming a new folder leaves none behind.
        with empty_new_folders_removed_on_error(output_dir):
            return _claim_and_train(settings, output_dir, fresh,
                                    (strategy, worker_timeout),
                                    (data_dir, user_data), execution)
    finally:
        keras.config.set_dtype_policy(previous_policy)


def _claim_and_train(settings, output_dir, fresh, strategy_options, data,
                     execution):
    """Starts the strategy, claims the folder and trains (or works for the
    chief, on another worker of a `multi_worker` cluster)."""
    strategy, worker_timeout = strategy_options
    distribution = get_strategy(strategy, worker_timeout=worker_timeout)
    check_batch_divides(distribution, settings.batch_size)
    # Only the chief writes the run's files. Other workers keep their own
    # backup (so that a restarted cluster resumes every worker from the
    # same step), checkpoint and logs in a scratch folder of their own,
    # removed when training ends.
    chief = is_chief(distribution)
    work_dir = output_dir if chief else os.path.join(
        output_dir, f".{task_name(distribution)}")
    with RunLock(work_dir), training_scope(distribution):
        if not chief:
            return _train_worker(settings, data, distribution, work_dir,
                                 execution)
        return _run_chief(settings, output_dir, fresh, data, distribution,
                          execution)


def _requested_settings(settings, model, dataset, setting_fields):
    """The `TrainingSettings` of `train`'s arguments (not yet resolved)."""
    if settings is None:
        unknown = sorted(set(setting_fields) - set(_SETTING_FIELDS))
        if unknown:
            raise TypeError(
                f"train() got unexpected keyword arguments {unknown}. "
                f"Expected fields of TrainingSettings {_SETTING_FIELDS} "
                "or the other arguments of train.")
        named = {"model": model, "dataset": dataset}
        return TrainingSettings(
            **{name: value for name, value in named.items()
               if value is not None}, **setting_fields)
    if not isinstance(settings, TrainingSettings):
        raise TypeError(
            "Expected `settings` to be a TrainingSettings. Received: "
            f"settings={settings!r} of type {type(settings).__name__}")
    given = [name for name, value in (("model", model), ("dataset", dataset))
             if value is not None] + sorted(setting_fields)
    if given:
        raise TypeError(
            "Pass either `settings` or the settings' fields, not both. "
            f"Received: settings and {given}")
    return settings


def _run_chief(settings, output_dir, fresh, data, distribution,
               execution):
    """The chief: claims the folder, then trains or finishes the run."""
    export_dir = os.path.join(output_dir, "export")
    model_path = os.path.join(output_dir, "model.keras")
    # Fails now rather than after training if `export/` holds anything but
    # an export of keras_caps (which a rerun replaces), and before `fresh`
    # deletes anything.
    check_export_target(export_dir, overwrite=True, model_path=model_path)
    run = RunFolder(output_dir, run_settings(settings, data[0]),
                    upgrade_settings=current_settings)
    finished = None if fresh else finished_run(run, settings)
    if finished is not None:
        return finished
    # Everything that can refuse this run (the data, the model, options
    # the model cannot take) is checked before the folder is claimed: a
    # refused command leaves it as it was, and the corrected one needs no
    # `--fresh`.
    network, splits = build_model_and_splits(settings, data, distribution,
                                             execution)
    run.open(fresh=fresh)
    record_backend(run)
    check_export_target(export_dir, overwrite=True, model_path=model_path)
    record = _train_chief(network, splits, settings, run, distribution,
                          execution)
    logging.info("Test metrics: %s", json.dumps(record["test"]))
    return record


def _train_chief(network, splits, settings, run, distribution, execution):
    """Trains or resumes, then writes each missing artifact in turn.

    Each stage is recorded in `run.json` once it is done (training first,
    before `model.keras` is written: a rerun rebuilds a missing
    `model.keras` from the best checkpoint), and the backup is deleted
    last: a crash or a full disk at any point leaves a folder that the
    same command completes without repeating a finished stage.
    """
    progress = run.progress
    if "trained" in progress:  # Resumed after training: the saved model.
        save_model = reload_trained(network, run.path, progress["trained"])
        logging.info("Training finished earlier in %s: writing what is "
                     "missing.", run.path)
    else:
        names = class_names(settings)
        if names is not None:  # Kept with the best checkpoint.
            write_class_names(os.path.join(run.path, "checkpoints",
                                           CLASS_NAMES_FILE), names)
        trained = fit_and_select(network, splits, settings, run.path,
                                 execution)
        save_model = True
    try:
        if "trained" not in progress:
            run.update(trained=trained)
        return write_artifacts(network, splits, settings, run,
                               distribution, save_model)
    except OSError as error:
        raise training_kept(error, run.path) from error


def _train_worker(settings, data, distribution, work_dir, execution):
    """A non-chief worker: trains and tests in step with the chief."""
    network, splits = build_model_and_splits(settings, data, distribution,
                                             execution)
    record = {**settings.to_record(), **fit_and_select(
        network, splits, settings, work_dir, execution)}
    record["test"] = split_metrics(network, splits["test"])
    for split in VIEWPOINT_TEST_SPLITS:  # In the chief's order.
        if split in splits:
            record[split] = split_metrics(network, splits[split])
    record.update(environment(distribution))
    shutil.rmtree(work_dir, ignore_errors=True)
    return record
