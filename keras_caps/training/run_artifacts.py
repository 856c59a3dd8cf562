"""The stages of a run after training: its artifacts, each written once
and recorded in `run.json` (`model.keras`, `class_names.json`, the test
metrics, `export/`, then `metrics.json`, and the backup deleted last).

`reload_trained` loads the trained model of a run that finished training
in an earlier process; `write_artifacts` writes what the run lacks;
`training_kept` says where the training is when writing fails.
"""

import logging
import os

import keras

from keras_caps.datasets.viewpoints import TEST_SPLITS as VIEWPOINT_TEST_SPLITS
from keras_caps.export import export_inference_model
from keras_caps.inference.class_names import CLASS_NAMES_FILE
from keras_caps.inference.class_names import write_class_names
from keras_caps.runs import is_keras_caps_export
from keras_caps.runs.atomic_files import save_model_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.run_folder import remove_backup
from keras_caps.training.backend_runtime import backend_versions
from keras_caps.training.hardware import describe_hardware


def reload_trained(network, output_dir, trained):
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


def write_artifacts(network, splits, settings, run, distribution,
                    save_model):
    """Writes the model, test metrics, export and `metrics.json` a run
    still lacks, recording each in `run.json`; returns the record."""
    output_dir, progress = run.path, run.progress
    model_path = os.path.join(output_dir, "model.keras")
    names = class_names(settings)
    if save_model:
        save_model_atomically(network, model_path)
    if names is not None:
        write_class_names(os.path.join(output_dir, CLASS_NAMES_FILE), names)
    if "test" not in progress:
        run.update(test=split_metrics(network, splits["test"]))
    _test_viewpoints(network, splits, run)  # After `test`, as workers do.
    export_dir = os.path.join(output_dir, "export")
    if not progress.get("exported") or not is_keras_caps_export(export_dir):
        # A rerun replaces the export of an earlier run (only an export of
        # keras_caps: anything else at `export/` is refused, never
        # deleted).
        _export(network, export_dir, settings, run, names)
    record = {**settings.to_record(), **progress["trained"],
              "test": progress["test"], **environment(distribution)}
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
            run.update(**{split: split_metrics(network, splits[split])})


def split_metrics(network, test_split):
    """The model's metrics on `test_split`, as floats."""
    metrics = network.evaluate(test_split, return_dict=True, verbose=0)
    return {key: float(value) for key, value in metrics.items()}


def environment(distribution):
    """What the record says of where the run ran: the strategy and its
    replicas, the hardware, the backend and the versions."""
    return {"strategy": getattr(distribution, "name",
                                type(distribution).__name__),
            "num_replicas": distribution.num_replicas_in_sync,
            "hardware": describe_hardware(),
            "backend": keras.backend.backend(),
            "versions": backend_versions()}


def class_names(settings):
    """The class names of a dataset a user brings (`None` for built-in
    datasets)."""
    if settings.data_source is None:
        return None
    return settings.data_source["class_names"]


def training_kept(error, output_dir):
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
