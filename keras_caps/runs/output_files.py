"""Files a command writes at a path the user names (`--output`).

A command never replaces a file it did not write itself. What it writes
carries its mark: a `written_by` field in a JSON object (`keras-caps
evaluate --output`), a `written_by` text entry in a PNG file (`keras-caps
plot`). `check_output_path` allows a new path, or an existing file that
holds the same command's mark; anything else (a user's file, a model, a
link, a file written by another command) is refused before any slow work,
naming the path. A training run's or a comparison's own files (`run.json`,
`model.keras`, `checkpoints/`, `compare.json`, `results.*`, ...) are
always refused, even where they do not exist yet: the run or comparison
writes them.
"""

import json
import os
import struct

from keras_caps.runs.run_folder import RUN_FILES
from keras_caps.runs.run_folder import RUN_RECORD

WRITTEN_BY = "written_by"
"""The key of a command's mark in the JSON objects and PNG files it writes."""

# The files of a training run (a folder holding `run.json`) and of a
# comparison (a folder holding `compare.json`) that only they write.
_RUN_ARTIFACTS = frozenset(RUN_FILES) | {"run.lock", "robustness.json",
                                         "transfer.json"}
_COMPARISON_RECORD = "compare.json"
_COMPARISON_ARTIFACTS = frozenset({
    _COMPARISON_RECORD, "models", "results.json", "results.csv",
    "results.md", "accuracy_vs_severity.png", "accuracy_vs_epsilon.png"})
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_LARGEST_MARKED_JSON = 1 << 24  # bytes: an evaluation record is far smaller.


def check_output_path(path, written_by, argument_name):
    """Raises a `ValueError` unless `written_by` may write the file `path`.

    Args:
        path: str. The file to write.
        written_by: str. The writing command, `"keras-caps evaluate"` (a
            JSON object) or `"keras-caps plot"` (a PNG file): an existing
            file is replaced only when it holds that mark.
        argument_name: str. The option that named `path`, for the message.

    Example:

    ```python
    check_output_path("metrics.json", "keras-caps evaluate", "--output")
    ```
    """
    prefix = f"Refusing to write `{argument_name}` {path!r}:"
    owner = _artifact_owner(path)
    if owner is not None:
        command, folder = owner
        raise ValueError(
            f"{prefix} it belongs to the "
            f"{'training run' if command == 'train' else 'comparison'} in "
            f"{folder!r}, which only `keras-caps {command}` writes. Choose "
            "another file name.")
    if os.path.isdir(path):
        raise ValueError(f"`{argument_name}` is a folder; expected a file "
                         f"path. Received: {argument_name}={path!r}")
    if os.path.islink(path) or (os.path.lexists(path)
                                and read_mark(path) != written_by):
        raise ValueError(
            f"{prefix} the file exists and was not written by "
            f"`{written_by}`; keras_caps never replaces a file it did not "
            "write. Delete it yourself or choose another file name.")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):  # The nearest existing folder above.
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(
            f"`{argument_name}` cannot be written: {folder!r} is not a "
            f"writable folder. Received: {argument_name}={path!r}")


def check_files_absent(folder, names, argument_name):
    """Refuses a folder that already holds any of the files `names` a
    command would write there: they are never replaced.

    Example:

    >>> check_files_absent("no/such/folder", ["report.json"], "--dir")
    """
    present = [name for name in names
               if os.path.lexists(os.path.join(folder, name))]
    if present:
        raise ValueError(
            f"{argument_name} {folder!r} already holds {present}; they are "
            "never replaced. Choose another folder, or move them. "
            f"Received: {argument_name}={folder!r}")


def read_mark(path):
    """The `written_by` mark of the JSON or PNG file `path`, or `None`."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(_PNG_SIGNATURE))
            if head == _PNG_SIGNATURE:
                return _png_mark(file)
            if os.fstat(file.fileno()).st_size > _LARGEST_MARKED_JSON:
                return None
            record = json.loads(head + file.read())
    except (OSError, ValueError, struct.error):
        return None
    return record.get(WRITTEN_BY) if isinstance(record, dict) else None


def _png_mark(file):
    """The `written_by` text entry of a PNG file read past its signature."""
    while True:
        length, kind = struct.unpack(">I4s", file.read(8))
        if kind in (b"IDAT", b"IEND"):  # Text entries come before the image.
            return None
        if kind != b"tEXt":
            file.seek(length + 4, os.SEEK_CUR)  # The data and its CRC.
            continue
        keyword, _, text = file.read(length).partition(b"\0")
        file.seek(4, os.SEEK_CUR)
        if keyword == WRITTEN_BY.encode():
            return text.decode("latin-1")


def _artifact_owner(path):
    """`(command, folder)`: `("train", run folder)` or `("compare",
    comparison folder)` if `path` is, or is inside, one of their own
    files; else `None`."""
    for candidate in {os.path.abspath(path), os.path.realpath(path)}:
        child, folder = candidate, os.path.dirname(candidate)
        while folder != child:
            name = os.path.basename(child)
            if name in _RUN_ARTIFACTS and os.path.isfile(
                    os.path.join(folder, RUN_RECORD)):
                return "train", folder
            if name in _COMPARISON_ARTIFACTS and os.path.isfile(
                    os.path.join(folder, _COMPARISON_RECORD)):
                return "compare", folder
            child, folder = folder, os.path.dirname(folder)
    return None
