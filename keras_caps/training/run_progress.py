"""What a run folder says of its run before training: the settings it
records (`run_settings`; a rerun with others is refused), whether the run
is already complete (`finished_run`: every artifact there) and which
backends ran it (`record_backend`)."""

import logging
import os

import keras

from keras_caps.applications import current_model_name
from keras_caps.datasets.data_record import data_differences
from keras_caps.datasets.data_record import data_record
from keras_caps.runs import is_keras_caps_export
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.training.user_data import check_same_data


def run_settings(settings, data_dir):
    """What `run.json` records as the run's settings: the settings and,
    for a built-in dataset, what its data is (`data`, by content: see
    `keras_caps.datasets.data_record`), hashed once per command."""
    record = settings.to_record()
    if not settings.is_user_data():  # Those record their `data_source`.
        record["data"] = data_record(settings.dataset, data_dir)
    return record


def finished_run(run, settings):
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


def current_settings(recorded):
    """The `settings` of a `run.json` with the model under its current
    name (a run written before 0.2.0 may name it otherwise), so that the
    run resumes: `RunFolder`'s `upgrade_settings`."""
    if not isinstance(recorded.get("model"), str):
        return recorded
    return {**recorded, "model": current_model_name(
        recorded["model"], recorded.get("reconstruction"))}


def record_backend(run):
    """Adds this process's Keras backend to the `backends` that ran the
    run (in `run.json`'s progress; a run resumed on another backend lists
    both, in order)."""
    backends = list(run.progress.get("backends", []))
    if keras.backend.backend() not in backends:
        run.update(backends=backends + [keras.backend.backend()])


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
