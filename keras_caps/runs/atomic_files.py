"""Writes that never leave a half-written file behind.

Each writes to a temporary name in the destination folder and renames it
into place (`os.replace` is atomic on POSIX and Windows), so a process
killed mid-write leaves either the old file or the new one. A write that
fails (a full disk, a read-only folder) removes its temporary file and
raises an `OSError` naming the destination (its `filename`), with the
original `errno` and `strerror`.
"""

import json
import os


def save_model_atomically(model, path):
    """`model.save(path)` through a temporary file in the same folder."""
    write_atomically(path, model.save)


def write_json_atomically(path, record):
    """Writes `record` as JSON to `path` through a temporary file."""
    write_text_atomically(path, json.dumps(record, indent=2, sort_keys=True))


def write_text_atomically(path, text):
    """Writes the string `text` to `path` through a temporary file."""

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)

    write_atomically(path, write)


def write_atomically(path, write):
    """Calls `write(temporary)`, then renames `temporary` to `path`.

    `temporary` is `.tmp-<pid>-<name of path>` in the folder of `path`
    (created if needed), so it keeps the extension of `path`. On any
    failure the temporary file is removed; an `OSError` is raised again
    with `path` as its `filename` (and in its message).
    """
    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(
        folder, f".tmp-{os.getpid()}-{os.path.basename(path)}")
    try:
        os.makedirs(folder, exist_ok=True)
        write(temporary)
        os.replace(temporary, path)
    except BaseException as error:  # No temporary file is left behind.
        _remove_quietly(temporary)
        if isinstance(error, OSError):
            raise error_naming(error, path) from error
        raise


def _remove_quietly(path):
    try:
        if os.path.lexists(path):
            os.remove(path)
    except OSError:  # The write's own error is the one to report.
        pass


def error_naming(error, path):
    """`error` as an `OSError` of the same kind whose filename is `path`.

    The `errno` and `strerror` are kept (so `OSError(errno, ...)` gives
    the same subclass, `FileNotFoundError`, ...); an error without an
    `errno` becomes an `OSError` whose message names `path`.

    Example:

    >>> error = error_naming(OSError(28, "No space left on device"), "a.json")
    >>> error.errno, error.filename
    (28, 'a.json')
    """
    if error.errno is None:  # No errno to keep: say what failed in words.
        return OSError(f"Could not write {path!r}: {error}")
    # `OSError(errno, ...)` picks the subclass (`FileNotFoundError`, ...).
    return OSError(error.errno, error.strerror or str(error), path)
