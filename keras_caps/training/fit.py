"""The training recipe behind `keras-caps train` and `keras-caps evaluate`.

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
"""

import dataclasses
import json
import logging
import os
import platform
import shutil
import time

import keras
import numpy as np

from keras_caps import datasets
from keras_caps import model_roles as roles
from keras_caps.callbacks import RoutingTemperatureScheduler
from keras_caps.datasets.data_record import data_differences
from keras_caps.datasets.data_record import data_record
from keras_caps.datasets.user_dataset import is_user_dataset
from keras_caps.datasets.user_dataset import resolve_user_dataset
from keras_caps.datasets.viewpoints import TEST_SPLITS as VIEWPOINT_TEST_SPLITS
from keras_caps.diagnostics import find_routers
from keras_caps.export import export_inference_model
from keras_caps.inference import check_pixel_range
from keras_caps.inference import load_model_file
from keras_caps.inference.class_names import CLASS_NAMES_FILE
from keras_caps.inference.class_names import write_class_names
from keras_caps.runs import check_export_target
from keras_caps.runs import is_keras_caps_export
from keras_caps.runs.atomic_files import save_model_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.runs.run_folder import RunFolder
from keras_caps.runs.run_folder import check_output_folder
from keras_caps.runs.run_folder import remove_backup
from keras_caps.runs.run_lock import RunLock
from keras_caps.schedules import ExponentialTemperatureDecay
from keras_caps.training.accuracy_target import AccuracyTarget
from keras_caps.training.accuracy_target import first_epoch_reaching
from keras_caps.training.backend_distribution import check_batch_divides
from keras_caps.training.backend_distribution import check_strategy_supported
from keras_caps.training.backend_runtime import backend_versions
from keras_caps.training.backend_runtime import describe_devices
from keras_caps.training.backend_runtime import enable_determinism
from keras_caps.training.backend_runtime import logs_callbacks
from keras_caps.training.backend_runtime import training_scope
from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.data_batches import batch_count
from keras_caps.training.data_batches import first_batch
from keras_caps.training.data_batches import first_batch_shapes
from keras_caps.training.data_batches import is_tf_dataset
from keras_caps.training.data_batches import resumed_batches
from keras_caps.training.data_batches import take_batches
from keras_caps.training.data_epoch import DataEpoch
from keras_caps.training.data_epoch import follows_epochs
from keras_caps.training.epoch_clock import EpochClock
from keras_caps.training.execution_options import check_input_workers
from keras_caps.training.execution_options import check_steps_per_execution
from keras_caps.training.execution_options import check_time_budget
from keras_caps.training.history_trim import HistoryTrim
from keras_caps.training.history_trim import trim_history
from keras_caps.training.model_recipe import MODELS
from keras_caps.training.resumable_backup import ResumableBackup
from keras_caps.training.step_timer import SteadyStepTimer
from keras_caps.training.step_timer import peak_memory_mb
from keras_caps.training.strategy import DEFAULT_WORKER_TIMEOUT
from keras_caps.training.strategy import get_strategy
from keras_caps.training.strategy import is_chief
from keras_caps.training.strategy import shard_by_data
from keras_caps.training.strategy import task_name
from keras_caps.training.training_settings import PRECISIONS  # noqa: F401
from keras_caps.training.training_settings import PROTOCOLS  # noqa: F401
from keras_caps.training.training_settings import TrainingSettings
from keras_caps.training.user_data import READ_OPTIONS
from keras_caps.training.user_data import build_for_user_data
from keras_caps.training.user_data import check_model_matches_data
from keras_caps.training.user_data import check_same_data
from keras_caps.training.user_data import read_user_data
from keras_caps.training.user_data import recorded_read_options
from keras_caps.training.user_data import training_statistics
from keras_caps.validation import check_known_name

# PRECISIONS and PROTOCOLS are defined with the settings, and importable
# from here as before. The fields `train` takes as keyword arguments,
# besides `model` and `dataset`:
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
    writes nothing there. On JAX and PyTorch, see `check_backend` for
    what differs.

    A dataset a user brings (`dataset="folder:PATH"`, `"npz:PATH"` or
    `"tfds:NAME"`, see `keras_caps.datasets.user_dataset`) is read and
    checked first; the model is the family's builder on `preset` (the
    closest by input size by default) with the data's `input_shape` and
    `num_classes`; the settings record the data's source record (content
    fingerprint included, so changed data is refused on resume), the
    preset and the augmentation; `class_names.json` is written beside the
    model and the best checkpoint, and into the export.

    Args:
        model: str. A key of `MODELS`. Defaults to `"efficient_capsnet"`.
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
        _refuse_read_options(settings.dataset, read_options)
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
        distribution = get_strategy(strategy, worker_timeout=worker_timeout)
        check_batch_divides(distribution, settings.batch_size)
        # Only the chief writes the run's files. Other workers keep their
        # own backup (so that a restarted cluster resumes every worker from
        # the same step), checkpoint and logs in a scratch folder of their
        # own, removed when training ends.
        chief = is_chief(distribution)
        work_dir = output_dir if chief else os.path.join(
            output_dir, f".{task_name(distribution)}")
        with RunLock(work_dir), training_scope(distribution):
            if not chief:
                return _train_worker(settings, (data_dir, user_data),
                                     distribution, work_dir, execution)
            return _run_chief(settings, output_dir, fresh,
                              (data_dir, user_data), distribution,
                              execution)
    finally:
        keras.config.set_dtype_policy(previous_policy)


def _refuse_read_options(dataset, read_options):
    """Raises when options for a dataset a user brings come with a
    built-in dataset."""
    given = [READ_OPTIONS[name] for name, value in read_options.items()
             if value is not None]
    if given:
        raise ValueError(
            f"The options of datasets a user brings (folder:PATH, "
            f"npz:PATH, tfds:NAME) do not apply to {dataset!r}, which has a "
            f"fixed image size and test split: drop {', '.join(given)}. "
            f"Received: dataset={dataset!r}"
            ", " + ", ".join(f"{name}={value!r}"
                             for name, value in read_options.items()
                             if value is not None))


def check_backend(command="`keras-caps train` (`keras_caps.training.train`)"):
    """Refuses, before anything is written, a backend the recipe cannot
    train on: it trains on TensorFlow, JAX and PyTorch.

    On JAX and PyTorch the recipe is the same (holdout selection, best
    checkpoint, resume, run records, CSV logs, mixed precision), with
    these differences: the strategies are `keras.distribution`'s (see
    `keras_caps.training.backend_distribution`); the TensorBoard logs
    need TensorFlow installed (without it they are skipped, with a
    notice); and the export stage writes what the backend can export, or
    is skipped with a notice saying how to export `model.keras` later
    (see `_export`).

    Args:
        command: str. What refuses, for the message.

    Raises:
        ValueError: when Keras runs on another backend.

    Example:

    ```python
    check_backend()  # Before writing a run's or a comparison's files.
    ```
    """
    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax", "torch"):
        raise ValueError(
            f"{command} trains on the TensorFlow, JAX or PyTorch backend; "
            f"the {backend!r} backend cannot train, so nothing was trained "
            "or written. Run it with KERAS_BACKEND=jax, torch or "
            f"tensorflow. Received: KERAS_BACKEND={backend!r}")


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
    run = RunFolder(output_dir, _run_settings(settings, data[0]))
    finished = None if fresh else _finished_run(run, settings)
    if finished is not None:
        return finished
    # Everything that can refuse this run (the data, the model, options
    # the model cannot take) is checked before the folder is claimed: a
    # refused command leaves it as it was, and the corrected one needs no
    # `--fresh`.
    network, splits = _build(settings, data, distribution, execution)
    run.open(fresh=fresh)
    _record_backend(run)
    check_export_target(export_dir, overwrite=True, model_path=model_path)
    record = _train_chief(network, splits, settings, run, distribution,
                          execution)
    logging.info("Test metrics: %s", json.dumps(record["test"]))
    return record


def _record_backend(run):
    """Adds this process's Keras backend to the `backends` that ran the
    run (in `run.json`'s progress; a run resumed on another backend lists
    both, in order)."""
    backends = list(run.progress.get("backends", []))
    if keras.backend.backend() not in backends:
        run.update(backends=backends + [keras.backend.backend()])


def _finished_run(run, settings):
    """The metrics of the run in `run.path` when it is complete, else
    `None`; raises when the folder belongs to other settings (before
    anything is written)."""
    record = run.read_record()  # A clear error naming an unreadable one.
    if record is None:
        return None
    recorded = record.get("settings", {})
    # What changed in the data first, then any other setting.
    check_same_data(recorded, settings, run.path)
    _check_same_built_in_data(recorded, run.settings, run.path)
    run.check_settings(record)
    progress = record.get("progress", {})
    if not progress.get("complete") or _missing_artifacts(
            run.path, export=not progress.get("export_skipped")):
        return None
    logging.info(
        "The run in %s is already complete, with the same settings: "
        "nothing to do (pass --fresh to train it again).", run.path)
    return read_json_record(os.path.join(run.path, "metrics.json"))


def _run_settings(settings, data_dir):
    """What `run.json` records as the run's settings: the settings and,
    for a built-in dataset, what its data is (`data`, by content: see
    `keras_caps.datasets.data_record`), hashed once per command."""
    record = settings.to_record()
    if not settings.is_user_data():  # Those record their `data_source`.
        record["data"] = data_record(settings.dataset, data_dir)
    return record


def _check_same_built_in_data(recorded, current, output_dir):
    """Raises, naming what changed, when the run in `output_dir` was
    trained on other data than the built-in dataset's data at hand."""
    if not isinstance(recorded.get("data"), dict) or "data" not in current:
        return
    changed = data_differences(recorded["data"], current["data"])
    if changed:
        raise ValueError(
            f"The data of {current['dataset']} is not what the run in "
            f"{output_dir!r} was trained on ({'; '.join(changed)}). Nothing "
            "was changed. Pass the same data (the same files, in any "
            "folder) to resume that run, train in another --output-dir, or "
            "pass --fresh (`fresh=True`) to delete that run's files and "
            "start over.")


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
        save_model = _reload_trained(network, run.path, progress["trained"])
        logging.info("Training finished earlier in %s: writing what is "
                     "missing.", run.path)
    else:
        class_names = _class_names(settings)
        if class_names is not None:  # Kept with the best checkpoint.
            write_class_names(os.path.join(run.path, "checkpoints",
                                           CLASS_NAMES_FILE), class_names)
        trained = _fit_and_select(network, splits, settings, run.path,
                                  execution)
        save_model = True
    try:
        if "trained" not in progress:
            run.update(trained=trained)
        return _write_artifacts(network, splits, settings, run,
                                distribution, save_model)
    except OSError as error:
        raise _training_kept(error, run.path) from error


def _reload_trained(network, output_dir, trained):
    """Loads the trained model of a run that finished training; returns
    whether `model.keras` is missing (and must be written)."""
    model_path = os.path.join(output_dir, "model.keras")
    best_path = os.path.join(output_dir, "checkpoints", "best.keras")
    final_path = os.path.join(output_dir, "backup", "latest.weights.h5")
    if os.path.exists(model_path):
        network.load_weights(model_path)
        return False
    if trained.get("selected_epoch") is not None and os.path.exists(
            best_path):
        network.load_weights(best_path)  # The selected model.
    elif trained.get("selected_epoch") is None and os.path.exists(
            final_path):
        network.load_weights(final_path)  # No epoch was selected.
    else:
        raise ValueError(
            f"The run in {output_dir!r} finished training but its "
            "model.keras and best checkpoint are gone, so its remaining "
            "artifacts cannot be written. Pass `--fresh` (`fresh=True`) "
            "to train again.")
    return True


def _write_artifacts(network, splits, settings, run, distribution,
                     save_model):
    """Writes the model, test metrics, export and `metrics.json` a run
    still lacks, recording each in `run.json`; returns the record."""
    output_dir, progress = run.path, run.progress
    model_path = os.path.join(output_dir, "model.keras")
    class_names = _class_names(settings)
    if save_model:
        save_model_atomically(network, model_path)
    if class_names is not None:
        write_class_names(os.path.join(output_dir, CLASS_NAMES_FILE),
                          class_names)
    if "test" not in progress:
        run.update(test=_test(network, splits["test"]))
    _test_viewpoints(network, splits, run)  # After `test`, as workers do.
    export_dir = os.path.join(output_dir, "export")
    if not progress.get("exported") or not is_keras_caps_export(export_dir):
        # A rerun replaces the export of an earlier run (only an export of
        # keras_caps: anything else at `export/` is refused, never
        # deleted).
        _export(network, export_dir, settings, run, class_names)
    record = {**settings.to_record(), **progress["trained"],
              "test": progress["test"], **_environment(distribution)}
    record.update({split: progress[split] for split in VIEWPOINT_TEST_SPLITS
                   if split in progress})
    if "data" in run.settings:
        record["data"] = run.settings["data"]
    if progress.get("export_skipped"):  # Why `export/` is not there.
        record["export_skipped"] = progress["export_skipped"]
    elif progress.get("export_format"):  # ONNX: no SavedModel here.
        record["export_format"] = progress["export_format"]
    write_json_atomically(os.path.join(output_dir, "metrics.json"), record)
    remove_backup(output_dir)  # Only what the run wrote there.
    run.update(complete=True)
    return record


def _export(network, export_dir, settings, run, class_names):
    """Exports the inference model and records it in `run.json`.

    On JAX and PyTorch, where the SavedModel cannot be written (no
    TensorFlow, or a backend that cannot write it; refused before anything
    is written), the export is written in ONNX instead where
    `keras_caps.export` offers it and it can be written here; else it is
    skipped with a one-line notice, and recorded (`export_skipped`): the
    run completes with `model.keras`, which `keras-caps export` exports
    later where the export can be written. On TensorFlow a failed export
    fails the run, as before.
    """
    options = {"reconstruction": settings.reconstruction, "overwrite": True,
               "model_path": os.path.join(run.path, "model.keras"),
               "class_names": class_names}
    try:
        export_inference_model(network, export_dir, **options)
        if run.progress.get("export_format") is not None:
            run.update(export_format=None)  # A SavedModel now.
    except (ValueError, ImportError) as error:
        if keras.backend.backend() == "tensorflow":
            raise
        reason = " ".join(str(error).split())
        onnx_error = _export_onnx(network, export_dir, options)
        if onnx_error is not None:
            _skip_export(run, f"{reason} ONNX: {onnx_error}",
                         options["model_path"])
            return
        logging.info("Exported in ONNX to %s (no SavedModel here: %s)",
                     export_dir, reason)
        run.update(export_format="onnx")
    run.update(exported=True)
    if run.progress.get("export_skipped") is not None:
        run.update(export_skipped=None)  # Written now.


def _export_onnx(network, export_dir, options):
    """Writes the ONNX export (`format="onnx"`); returns `None` once
    written, else why not."""
    try:
        export_inference_model(network, export_dir, format="onnx",
                               **options)
    except OSError:
        raise  # A full disk is an error of the run, reported as such.
    except Exception as error:  # noqa: BLE001 (what the exporter refused)
        return f"{type(error).__name__}: {' '.join(str(error).split())}"
    return None


def _skip_export(run, reason, model_path):
    logging.warning(
        "Export skipped on the %s backend: %s The trained model is in %s; "
        "export it with `keras-caps export --model-path %s` where the "
        "export can be written.", keras.backend.backend(), reason,
        model_path, model_path)
    run.update(exported=False, export_skipped=reason)


def _test_viewpoints(network, splits, run):
    """With smallNORB's `viewpoints`: the test metrics of the familiar and
    the novel viewpoints (`"test_familiar"`, `"test_novel"` of the
    record; Hinton et al. 2018, §5.1), each recorded once done."""
    for split in VIEWPOINT_TEST_SPLITS:
        if split in splits and split not in run.progress:
            run.update(**{split: _test(network, splits[split])})


def _class_names(settings):
    """The class names of a dataset a user brings (`None` for built-in
    datasets)."""
    if settings.data_source is None:
        return None
    return settings.data_source["class_names"]


def _training_kept(error, output_dir):
    """`error` (writing an artifact after training failed) as an `OSError`
    whose message says where the trained model is and how to finish."""
    best_path = os.path.join(output_dir, "checkpoints", "best.keras")
    backup_path = os.path.join(output_dir, "backup")
    kept = (f"the selected model is in {best_path!r}"
            if os.path.exists(best_path)
            else f"its final state is in {backup_path!r}")
    what = error.strerror or str(error)
    if error.filename:
        what = f"{what}: {error.filename!r}"
    message = (
        f"Training finished, but writing the run's files failed ({what}). "
        f"The training is not lost: {kept}. Free the space (or fix the "
        "folder) and rerun the same command: it writes the missing files "
        "without training again.")
    if error.errno is None:
        return OSError(message)
    return OSError(error.errno, message)


def _missing_artifacts(output_dir, export=True):
    """The names of a complete run's artifacts that are missing (an
    unreadable `metrics.json` counts: it is written again from the
    progress in `run.json`; `export/` only when `export`, i.e. the run
    did not skip it on its backend)."""
    missing = [name for name in ("model.keras", "metrics.json")
               if not os.path.exists(os.path.join(output_dir, name))]
    metrics_path = os.path.join(output_dir, "metrics.json")
    if "metrics.json" not in missing:
        try:
            read_json_record(metrics_path)
        except UnreadableRecordError as error:
            logging.warning("%s It is written again from the run's "
                            "progress in run.json.", error)
            missing.append("metrics.json")
    if export and not is_keras_caps_export(os.path.join(output_dir,
                                                        "export")):
        missing.append("export")
    return missing


def _train_worker(settings, data, distribution, work_dir, execution):
    """A non-chief worker: trains and tests in step with the chief."""
    network, splits = _build(settings, data, distribution, execution)
    record = {**settings.to_record(), **_fit_and_select(
        network, splits, settings, work_dir, execution)}
    record["test"] = _test(network, splits["test"])
    for split in VIEWPOINT_TEST_SPLITS:  # In the chief's order.
        if split in splits:
            record[split] = _test(network, splits[split])
    record.update(_environment(distribution))
    shutil.rmtree(work_dir, ignore_errors=True)
    return record


def _environment(distribution):
    return {"strategy": getattr(distribution, "name",
                                type(distribution).__name__),
            "num_replicas": distribution.num_replicas_in_sync,
            "hardware": describe_hardware(),
            "backend": keras.backend.backend(),
            "versions": backend_versions()}


def _build(settings, data, distribution, execution):
    """The model (built in the strategy's scope, compiled to run
    `steps_per_execution` steps a call) and the three splits.

    `data` is `(data_dir, user_data)`: the folder of the built-in datasets,
    and the `UserDataset` of a dataset a user brings (else `None`).
    """
    data_dir, user_data = data
    family = MODELS[settings.model]
    if user_data is None:
        load, input_statistics = _built_in_loader(
            settings, data_dir, execution["download"],
            execution["input_workers"])
    else:
        load, input_statistics = _user_data_loader(settings, user_data)
    # Global batches; under several workers each keeps its share of every
    # batch (see `shard_by_data` for the policy).
    names = ["train", "validation", "test"]
    if settings.dataset_options.get("viewpoints") is not None:
        names += list(VIEWPOINT_TEST_SPLITS)  # smallNORB's viewpoints.
    splits = {split: shard_by_data(load(split)) for split in names}
    for split, batches in splits.items():
        _check_batches(batches, split, settings.dataset, settings.batch_size,
                       settings.steps_per_epoch if split == "train"
                       else None)
    with distribution.scope():
        if user_data is None:
            network = family.build(settings.dataset,
                                   reconstruction=settings.reconstruction,
                                   input_statistics=input_statistics,
                                   **settings.builder_options())
        else:
            network = build_for_user_data(family, settings, user_data,
                                          input_statistics)
    # What `compile(steps_per_execution=...)` sets; the saved model's
    # compile config keeps the builder's (1).
    network.steps_per_execution = execution["steps_per_execution"]
    check_labels_match(network, splits["train"])
    if settings.temperature_schedule() is not None and not find_routers(
            network):
        raise ValueError(
            f"The model {settings.model!r} has no router with a routing "
            "temperature, so `routing_temperature` (`--routing-temperature`"
            ", with `--temperature-decay` and `--min-temperature`) cannot "
            "apply to it. Drop those options for this model. Received: "
            f"routing_temperature={settings.routing_temperature!r}")
    return network, splits


def _built_in_loader(settings, data_dir, download, workers=None):
    """`load(split)` of a built-in dataset (with `workers` threads in the
    NumPy pipeline, when given), and the input statistics of models that
    standardise their input (else `None`)."""
    dataset, seed = settings.dataset, settings.seed
    options = settings.dataset_options
    input_statistics = None
    if MODELS[settings.model].standardizes_input(dataset):
        input_statistics = datasets.training_statistics(
            dataset, data_dir=data_dir, seed=seed,
            validation=settings.validation, download=download,
            viewpoints=options.get("viewpoints"))
        options = {"statistics": input_statistics, **options}

    def load(split):
        return datasets.load(
            dataset, split, batch_size=settings.batch_size,
            data_dir=data_dir, seed=seed, validation=settings.validation,
            reconstruction=settings.reconstruction, download=download,
            workers=workers, **options)

    return load, input_statistics


def _user_data_loader(settings, user_data):
    """`load(split)` of a dataset a user brings, and the input statistics
    of models that standardise their input (else `None`)."""
    input_statistics = None
    if MODELS[settings.model].standardizes_input(settings.preset_name()):
        input_statistics = training_statistics(
            user_data, seed=settings.seed, validation=settings.validation)

    def load(split):
        return user_data.load(
            split, batch_size=settings.batch_size, seed=settings.seed,
            validation=settings.validation,
            reconstruction=settings.reconstruction,
            **settings.dataset_options)

    return load, input_statistics


def _check_batches(data, split, dataset, batch_size, steps_per_epoch=None):
    """Raises when a split yields no batch, or fewer than `steps_per_epoch`.

    Returns the number of batches of one pass (`None` when unknown).
    """
    batches = batch_count(data)
    if batches is None:
        return None
    if batches == 0:
        why = ("it has fewer examples than one batch (training drops the "
               "last partial batch)" if split == "train"
               else "it has no examples")
        raise ValueError(
            f"The {split!r} split of {dataset!r} yields no batch of "
            f"batch_size={batch_size}: {why}. Use a smaller `batch_size` or "
            "more data.")
    if steps_per_epoch is not None and steps_per_epoch > batches:
        raise ValueError(
            f"`steps_per_epoch` is larger than one epoch of the {split!r} "
            f"split of {dataset!r}, which has {batches} batches of "
            f"batch_size={batch_size}. Expected at most {batches}. "
            f"Received: steps_per_epoch={steps_per_epoch}")
    return batches


def _fit_and_select(network, splits, settings, work_dir, execution):
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
    callbacks, target, step_timer = _recipe_callbacks(
        settings, work_dir, checkpoint, backup, clock)
    train_batches = batch_count(splits["train"])
    steps_per_epoch = settings.steps_per_epoch or (
        train_batches if train_batches else None)
    epoch, done = backup.restore(network)
    if steps_per_epoch is not None and done >= steps_per_epoch:
        epoch, done = epoch + 1, 0
    reached_before = _target_reached_before(target, work_dir, epoch)
    if (execution["input_workers"] or 1) > 1:
        _build_compiled_state(network, splits["train"])
    start = time.time()
    if not reached_before:
        _train_epochs(network, splits, settings, (callbacks, target, clock),
                      execution["verbose"], (epoch, done))
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
        "epochs_trained": clock.last_epoch or epoch,
        "train_steps_per_epoch": steps_per_epoch,
        "train_steps_this_run": backup.steps_this_run,
        "train_steps_total": total_steps,
        "train_seconds_this_run": round(train_seconds, 1),
        **_target_record(target, reached_before, steps_per_epoch),
        **_execution_record(execution, splits["train"], clock),
        # This process's training batches without the warm-up steps, and
        # its peak resident memory (framework runtime included).
        **step_timer.record(),
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


def _train_epochs(network, splits, settings, callbacks, verbose, position):
    """The rest of an interrupted epoch (when `position`, an epoch and its
    steps done, is within one), then the epochs up to `settings.epochs`,
    unless the accuracy target or the clock's budget stopped training.

    `callbacks` is `(callbacks, target, clock)` of `_recipe_callbacks`.
    """
    callbacks, target, clock = callbacks
    epoch, done = position
    if done:  # The rest of the interrupted epoch.
        _fit_epochs(network, splits, settings, callbacks, verbose,
                    (epoch, done), epoch + 1)
        epoch, done = epoch + 1, 0
    if (target is None or target.reached is None) and not clock.ran_out:
        _fit_epochs(network, splits, settings, callbacks, verbose,
                    (epoch, 0), settings.epochs)


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


def _recipe_callbacks(settings, work_dir, checkpoint, backup, clock):
    """The run's callbacks in order (the epoch clock among them), its
    accuracy target (or `None`) and its step timer."""
    family = MODELS[settings.model]
    callbacks = _callbacks(
        work_dir, checkpoint, backup,
        family.learning_rate_schedule(settings.preset_name()),
        _schedule_config(settings))
    if family.recipe_callbacks is not None:
        # The family's own schedules go with the others, before the logs.
        callbacks[:0] = family.recipe_callbacks(settings.preset_name(),
                                                settings.epochs)
    target = None
    if settings.until_accuracy is not None:
        target = AccuracyTarget(settings.until_accuracy)
        callbacks.insert(-1, target)  # After the logs, before the backup.
    callbacks.insert(-1, clock)  # Its stop comes after the epoch's files.
    # First: its batch end is read before the backup's checkpoint runs.
    step_timer = SteadyStepTimer()
    callbacks.insert(0, step_timer)
    return callbacks, target, step_timer


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


def _fit_epochs(network, splits, settings, callbacks, verbose, position,
                epochs):
    """`fit` from `position` (an epoch and its steps done) to `epochs`.

    With steps done, the epoch runs only its remaining steps: the training
    data skips the batches done, and `fit` runs that one epoch (on
    exactly those batches when the steps left are not a multiple of the
    model's `steps_per_execution`: Keras would run its last call in full
    on repeated data).
    """
    epoch, done = position
    callbacks[-1].start(epoch, done)  # The backup (see `_callbacks`).
    steps = settings.steps_per_epoch
    train = resumed_batches(splits["train"], epoch, done, steps)
    if follows_epochs(splits["train"]):
        # Before the backup, which must stay last (see `_callbacks`).
        callbacks = [*callbacks[:-1], DataEpoch(splits["train"]),
                     callbacks[-1]]
    if steps is not None:
        steps -= done
    if steps is not None and steps % network.steps_per_execution:
        train, steps = take_batches(train, steps), None
    # Where `fit` starts: read by `HistoryTrim` when training begins.
    network._initial_epoch = epoch
    try:
        network.fit(train,
                    validation_data=splits["validation"], epochs=epochs,
                    initial_epoch=epoch, steps_per_epoch=steps,
                    callbacks=callbacks, verbose=verbose,
                    shuffle=False)  # The pipeline shuffles each epoch.
    finally:
        network._initial_epoch = None


def _schedule_config(settings):
    schedule = settings.temperature_schedule()
    return None if schedule is None else schedule.get_config()


def _test(network, test_split):
    metrics = network.evaluate(test_split, return_dict=True, verbose=0)
    return {key: float(value) for key, value in metrics.items()}


def _callbacks(work_dir, checkpoint, backup, schedule,
               routing_temperature=None):
    # The schedulers come first: they add each epoch's `learning_rate` and
    # `routing_temperature` to the logs that the CSV and TensorBoard logs
    # then write. The backup comes last: an epoch's backup is written once
    # its validation, checkpoint and logs are, so a run resumed from it
    # never lacks them.
    callbacks = [] if schedule is None else [
        keras.callbacks.LearningRateScheduler(schedule)]
    if routing_temperature is not None:
        callbacks.append(RoutingTemperatureScheduler(
            ExponentialTemperatureDecay(**routing_temperature)))
    history_path = os.path.join(work_dir, "history.csv")
    return callbacks + [
        # Before the CSV log opens the file: drops the rows of the epochs
        # trained again (from `network._initial_epoch`).
        HistoryTrim(history_path),
        checkpoint,
        keras.callbacks.CSVLogger(history_path, append=True),
        *logs_callbacks(os.path.join(work_dir, "logs")),
        backup,
    ]


def evaluate(model_path, dataset, *, batch_size=16, data_dir=None, seed=42,
             dataset_options=None, download=True, image_size=None,
             color_mode=None, test_dir=None, test_share=None):
    """Evaluates a saved `.keras` model on the test split of `dataset`.

    When the model comes from `train` (a `metrics.json` beside it), the
    test set is built with the loader options that run used (e.g.
    CapsNet's 4-pixel MultiMNIST shifts); `dataset_options` override them.
    `download=False` reads prepared TFDS datasets only (see
    `keras_caps.datasets.load`).

    A dataset a user brings (`"folder:PATH"`, `"npz:PATH"`,
    `"tfds:NAME"`) is read as the run that trained the model read it (its
    image size, colour mode and test data, from the `metrics.json` beside
    the model) unless `image_size`, `color_mode`, `test_dir` or
    `test_share` are given; without a run record, at the model's input
    size and colour mode. Images or classes that differ from the model's
    (its input shape, the `class_names.json` beside it) are refused.

    Example:

    ```python
    record = evaluate("runs/cats/model.keras", "folder:my_images")
    record["test"]["accuracy"]
    ```
    """
    read_options = {"image_size": image_size, "color_mode": color_mode,
                    "test_dir": test_dir, "test_share": test_share}
    if not is_user_dataset(dataset):
        check_known_name("dataset", dataset, datasets.DATASETS)
        _refuse_read_options(dataset, read_options)
    network = load_model_file(model_path, "model_path")
    if not getattr(network, "compiled", False):
        raise ValueError(
            "`model_path` holds a model saved without its compiled loss "
            "and metrics, which `evaluate` needs: save the model from an "
            "application builder (compile=True) or `keras-caps train`. "
            f"Received: model_path={model_path!r}")
    reconstruction = roles.LABEL in {layer.name for layer in network.layers}
    record = _read_run_record(model_path)
    result = {"model_path": os.path.abspath(model_path), "dataset": dataset}
    if is_user_dataset(dataset):
        user_data = _evaluation_data(network, model_path, dataset, record,
                                     read_options, (data_dir, download))
        test = user_data.load("test", batch_size=batch_size, seed=seed,
                              reconstruction=reconstruction)
        result["data_source"] = user_data.source_record()
    else:
        options = {}
        if record.get("dataset") == dataset:
            options.update(record.get("dataset_options", {}))
        options.update(dataset_options or {})
        test = datasets.load(dataset, "test", batch_size=batch_size,
                             data_dir=data_dir, seed=seed,
                             reconstruction=reconstruction,
                             download=download, **options)
    _check_batches(test, "test", dataset, batch_size)
    check_labels_match(network, test)
    inputs = first_batch(test)[0]
    images = (inputs[roles.IMAGE] if isinstance(inputs, dict)
              and roles.IMAGE in inputs else keras.tree.flatten(inputs)[0])
    check_pixel_range(np.asarray(images), f"the {dataset!r} test images")
    metrics = network.evaluate(test, return_dict=True, verbose=0)
    return {**result, "hardware": describe_hardware(),
            "backend": keras.backend.backend(),
            "test": {key: float(value) for key, value in metrics.items()}}


def _evaluation_data(network, model_path, dataset, record, read_options,
                     source):
    """The `UserDataset` a model is evaluated on: read as its run read it
    (the run record's `data_source`), else at the model's input size and
    colour mode, with the read options given over either."""
    data_dir, download = source
    given = {name: value for name, value in read_options.items()
             if value is not None}
    if (record.get("dataset") == dataset and record.get("data_source")
            and not given):
        options = recorded_read_options(record["data_source"], data_dir)
    else:
        height, width, channels = roles.image_input(network).shape[1:]
        options = {"image_size": (height, width), "data_dir": data_dir,
                   "color_mode": {1: "grayscale", 3: "rgb"}.get(channels),
                   **given}
    data = resolve_user_dataset(dataset, download=download, **options)
    check_model_matches_data(network, data, model_path)
    return data


def _read_run_record(model_path):
    """The `metrics.json` of the run beside `model_path` (`{}` if none)."""
    path = os.path.join(os.path.dirname(os.path.abspath(model_path)),
                        "metrics.json")
    if not os.path.exists(path):
        return {}
    try:
        return read_json_record(path)
    except UnreadableRecordError as error:
        message = (
            f"{error} evaluate reads the test-set options of the run from "
            "the metrics.json beside the model. Repair or delete it, or "
            "rerun the `keras-caps train` command that made the run: it "
            "writes the file again from its run.json, without training.")
    raise ValueError(message) from None


def describe_hardware():
    """A short description of the devices the backend trains on."""
    gpus = describe_devices()
    if gpus is not None:
        return gpus
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"CPU: {cpu}, {os.cpu_count()} cores"


def check_labels_match(network, dataset):
    """Raises when the dataset's label depth differs from the model's.

    Args:
        network: A Keras model whose first output holds the class scores.
        dataset: A `tf.data.Dataset` or `keras.utils.PyDataset` of
            `(inputs, labels)`, or of `inputs` with a `"label"` entry
            (decoder models).

    Example:

    ```python
    check_labels_match(network, datasets.load("mnist", "test"))
    ```
    """
    shapes = first_batch_shapes(dataset)
    inputs = shapes[0]
    labels = inputs[roles.LABEL] if isinstance(inputs, dict) else shapes[1]
    model_classes = keras.tree.flatten(network.output)[0].shape[-1]
    if labels[-1] != model_classes:
        raise ValueError(
            f"The dataset has {labels[-1]} classes but the model "
            f"outputs {model_classes} class scores. Received: labels of "
            f"shape {tuple(labels)}")
