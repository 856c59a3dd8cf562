"""A training run's output folder: what it owns, its settings, its progress.

`run.json` records the settings of the run that made the folder (everything
that changes the result) and how far it got. A run reuses the folder only
when the settings are the same (it then resumes, or finishes the missing
artifacts, or, when complete, does nothing); other settings are refused,
listing the differences, unless `fresh=True`, which deletes what an earlier
run wrote (the names in `RUN_FILES`; inside their folders only the files a
run writes there, `RUN_FOLDER_CONTENTS`; nothing else) and starts over.
"""

import contextlib
import fnmatch
import json
import logging
import os
import shutil

from keras_caps.runs.atomic_files import write_json_atomically

RUN_RECORD = "run.json"
# Everything a run writes in its folder, besides its lock (`run.lock`),
# the hidden scratch folders of other workers and temporary names, which
# start with `TEMPORARY_PREFIXES` (files being written, an export being
# staged or replaced).
RUN_FILES = ("run.json", "backup", "checkpoints", "history.csv", "logs",
             "model.keras", "class_names.json", "export", "metrics.json")
TEMPORARY_PREFIXES = (".tmp-", ".export-", ".retired-")
# Settings a `run.json` of an earlier keras_caps may lack (`data`, the
# content record of the data): such a run resumes with the value at hand,
# which `open` records.
ADOPTABLE = ("data",)
# What a run writes inside its folders (shell patterns of paths relative
# to the folder; `export/` is checked file by file against its marker):
# `clear` deletes these, the run's temporary names and the folders left
# empty, so a file a user put in one of them survives `--fresh`.
RUN_FOLDER_CONTENTS = {
    "checkpoints": ("best.keras", "best.keras.json", "class_names.json"),
    "backup": ("latest.weights.h5", "training_metadata.json", "*.bkp",
               ".tmp-*"),
    "logs": ("train/events.out.tfevents.*",
             "validation/events.out.tfevents.*"),
}


class RunFolder:
    """The output folder of one training run and its `run.json`.

    Args:
        path: str. The output folder.
        settings: a settings record with a `to_record()` method (such as
            `keras_caps.training.TrainingSettings`, whose record is the
            schema of `run.json`'s `settings`), or any JSON-serialisable
            dict. A folder made with other settings is refused.
        upgrade_settings: Callable or `None`. Maps the `settings` an
            earlier version recorded to today's form (e.g. a model's new
            name) before they are compared; `None`: as recorded.

    Example:

    ```python
    settings = TrainingSettings(epochs=3, seed=1).resolve()
    folder = RunFolder("runs/mnist", settings)
    progress = folder.open()  # {} for a new run.
    folder.update(trained=True)
    ```
    """

    def __init__(self, path, settings, upgrade_settings=None):
        self.path = path
        self.upgrade_settings = upgrade_settings
        if hasattr(settings, "to_record"):
            settings = settings.to_record()
        self.settings = json.loads(json.dumps(settings))
        self.record_path = os.path.join(path, RUN_RECORD)
        self.progress = {}

    def open(self, fresh=False):
        """Checks the folder against the settings and claims it.

        Args:
            fresh: bool. Delete what an earlier run wrote and start over
                instead of refusing other settings.

        Returns:
            The recorded progress (`{}` for a new or fresh run).
        """
        check_output_folder(self.path)
        os.makedirs(self.path, exist_ok=True)
        cleared = fresh and os.path.exists(self.record_path)
        if cleared:
            # Only a folder with a run record is a run's: `fresh` never
            # deletes files that no run of ours may have written. An
            # unreadable record is still ours, and `fresh` replaces it.
            self.clear()
            record = None
        else:
            record = self.read_record()
        if record is None:
            # After `clear`, what is left is a user's: no leftover check.
            leftovers = [] if cleared else [
                name for name in RUN_FILES
                if os.path.lexists(os.path.join(self.path, name))]
            if leftovers:
                raise ValueError(
                    f"The output folder {self.path!r} holds files of a "
                    f"training run ({', '.join(leftovers)}) but no "
                    f"{RUN_RECORD} saying which settings made them (an "
                    "earlier keras_caps version, a crash before the run "
                    "started, or files of your own), so it cannot be "
                    "resumed safely, and `--fresh` does not delete files "
                    "it cannot tell are a run's. Delete them yourself, or "
                    "use another `--output-dir`.")
        else:
            self.check_settings(record)
        self.progress = {} if record is None else dict(
            record.get("progress", {}))
        self._remove_temporaries()  # Left by a killed run: we hold the lock.
        if record != {"settings": self.settings, "progress": self.progress}:
            self._write()
        return dict(self.progress)

    def update(self, **progress):
        """Records finished stages (atomically)."""
        self.progress.update(progress)
        self._write()

    def clear(self):
        """Deletes what a run writes here (`RUN_FILES`) and nothing else.

        Inside `checkpoints/`, `backup/` and `logs/` only the files a run
        writes there (`RUN_FOLDER_CONTENTS`) are deleted; other files stay
        (a warning lists them), with the folders that hold them.

        `export/` must be absent, empty or an export of keras_caps holding
        only what it wrote (see `is_keras_caps_export`); otherwise nothing
        at all is deleted and a `ValueError` names it.
        """
        from keras_caps.runs.export_manifest import is_keras_caps_export

        export = os.path.join(self.path, "export")
        if (os.path.lexists(export) and not (
                os.path.isdir(export) and not os.path.islink(export)
                and (not os.listdir(export)
                     or is_keras_caps_export(export)))):
            raise ValueError(
                f"Cannot start fresh in {self.path!r}: {export!r} is not an "
                "export written by keras_caps (it holds files keras_caps "
                "did not write, or changed ones), and keras_caps never "
                "deletes files it did not write. Nothing was deleted. Move "
                "your files out of it, or use another `--output-dir`.")
        removed, kept = [], []
        for name in RUN_FILES:
            path = os.path.join(self.path, name)
            if not os.path.lexists(path):
                continue
            if name in RUN_FOLDER_CONTENTS and os.path.isdir(path) and (
                    not os.path.islink(path)):
                kept += _clear_run_folder(path, RUN_FOLDER_CONTENTS[name])
            elif os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)  # export/: every file checked above.
            else:
                os.remove(path)
            removed.append(name)
        if removed:
            logging.info("Started fresh in %s: deleted %s.", self.path,
                         ", ".join(removed))
        if kept:
            logging.warning(
                "Kept %d file(s) that no run writes in %s: %s.", len(kept),
                self.path, ", ".join(kept[:5]))

    def _remove_temporaries(self):
        for name in os.listdir(self.path):
            if name.startswith(TEMPORARY_PREFIXES):
                path = os.path.join(self.path, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)

    def check_settings(self, record):
        """Raises a `ValueError` listing the differences when `record` (a
        `run.json` object) holds other settings; writes nothing.

        A recorded run that lacks a key of `ADOPTABLE` (written by an
        earlier keras_caps) matches without it: `open` then records the
        value at hand.
        """
        recorded = record.get("settings", {})
        current = {key: value for key, value in self.settings.items()
                   if key in recorded or key not in ADOPTABLE}
        differences = describe_differences(recorded, current)
        if differences:
            raise ValueError(
                f"The output folder {self.path!r} belongs to a run with "
                f"other settings ({'; '.join(differences)}). Nothing was "
                "changed. Rerun with the same settings to resume it, "
                "pass `--fresh` (`fresh=True`) to delete that run's "
                "files and start over, or use another `--output-dir`.")

    def read_record(self):
        """The folder's `run.json` object, or `None` if it has none; a
        `ValueError` naming an unreadable one (writes nothing)."""
        return self._read_record()

    def _read_record(self):
        if not os.path.exists(self.record_path):
            return None
        try:
            with open(self.record_path) as file:
                record = json.load(file)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as error:
            raise ValueError(
                f"The run record {self.record_path!r} is unreadable "
                f"({error}). Pass `--fresh` (`fresh=True`) to delete the "
                "run's files and start over, or use another "
                "`--output-dir`.") from None
        if self.upgrade_settings is not None and isinstance(
                record.get("settings"), dict):
            record = {**record,
                      "settings": self.upgrade_settings(record["settings"])}
        return record

    def _write(self):
        write_json_atomically(self.record_path, {
            "settings": self.settings, "progress": self.progress})


def remove_backup(run_path):
    """Deletes the run's `backup/` once the run is complete: the files a
    run writes there (`RUN_FOLDER_CONTENTS["backup"]`) and nothing else.

    Example:

    ```python
    remove_backup("runs/mnist")  # runs/mnist/backup/ is gone, unless a
    # user put a file of their own in it.
    ```
    """
    backup = os.path.join(run_path, "backup")
    if os.path.isdir(backup) and not os.path.islink(backup):
        _clear_run_folder(backup, RUN_FOLDER_CONTENTS["backup"])


def _clear_run_folder(folder, patterns):
    """Deletes the files of `patterns` (and temporary names) under
    `folder`, then the folders left empty; returns the other files' paths
    (relative to the run folder), which stay."""
    kept = []
    for root, folders, names in os.walk(folder, topdown=False):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            if name.startswith(TEMPORARY_PREFIXES) or any(
                    fnmatch.fnmatchcase(relative, pattern)
                    for pattern in patterns):
                os.remove(path)
            else:
                kept.append(os.path.relpath(path, os.path.dirname(folder)))
        for name in folders:
            path = os.path.join(root, name)
            if os.path.isdir(path) and not os.path.islink(path) and (
                    not os.listdir(path)):
                os.rmdir(path)
    if not os.listdir(folder):
        os.rmdir(folder)
    return sorted(kept)


def describe_differences(recorded, requested):
    """`["seed: 1 (folder) != 7 (this run)", ...]` for differing settings."""
    differences = []
    for key in sorted(set(recorded) | set(requested)):
        missing = "<unset>"
        old, new = recorded.get(key, missing), requested.get(key, missing)
        if old != new:
            differences.append(
                f"{key}: {json.dumps(old) if old is not missing else old} in "
                f"the folder, {json.dumps(new) if new is not missing else new}"
                " now")
    return differences


def check_output_folder(path):
    """A clear `ValueError` if `path` cannot be an output folder.

    Creates nothing, so a command refused by a later check leaves no empty
    folder behind: `path` is either a writable folder, or a new path whose
    nearest existing parent is a writable folder (`RunLock` creates it
    when the run claims it).

    Example:

    >>> check_output_folder("runs/new_run")  # a new path: nothing created
    """
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(
            "The output folder exists and is not a folder. Expected a folder "
            f"(or a new path). Received: output_dir={path!r}")
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        raise ValueError(
            f"Cannot create the output folder: Not a directory: {existing!r} "
            f"is a file. Received: output_dir={path!r}")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = ("The output folder is" if existing == os.path.abspath(path)
                else f"The output folder cannot be created: {existing!r} is")
        raise ValueError(
            f"{what} not writable by this user. Received: "
            f"output_dir={path!r}")


@contextlib.contextmanager
def empty_new_folders_removed_on_error(path):
    """Removes the folders of `path` that the body created, if it raises.

    Only folders that did not exist on entry and are empty on the error are
    removed (`os.rmdir`, which never deletes a file), deepest first: a run
    refused after claiming a new folder (data that cannot be read, a
    strategy that cannot start) leaves nothing behind, while anything a
    run or a user wrote stays.

    Example:

    ```python
    with empty_new_folders_removed_on_error("runs/new/run"):
        with RunLock("runs/new/run"):  # creates runs/new/run
            raise ValueError("refused")  # runs/new is gone again
    ```
    """
    existing = _nearest_existing(path)
    try:
        yield
    except BaseException:
        folder = os.path.abspath(path)
        while folder != existing and folder.startswith(existing + os.sep):
            try:
                os.rmdir(folder)
            except OSError:  # Not empty (or gone): keep it and its parents.
                break
            folder = os.path.dirname(folder)
        raise


def _nearest_existing(path):
    """`path`'s nearest existing ancestor (itself if it exists), absolute."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        current = os.path.dirname(current)
    return current
