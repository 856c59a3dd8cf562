"""Writes that never leave a half-written file behind.

Each writes to a temporary name in the destination folder and renames it
into place (`os.replace` is atomic on POSIX and Windows), so a process
killed mid-write leaves either the old file or the new one.
"""

import json
import os


def save_model_atomically(model, path):
    """`model.save(path)` through a temporary file in the same folder."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(
        folder, f".tmp-{os.getpid()}-{os.path.basename(path)}")
    model.save(temporary)
    os.replace(temporary, path)


def write_json_atomically(path, record):
    """Writes `record` as JSON to `path` through a temporary file."""
    write_text_atomically(path, json.dumps(record, indent=2, sort_keys=True))


def write_text_atomically(path, text):
    """Writes the string `text` to `path` through a temporary file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(
        folder, f".tmp-{os.getpid()}-{os.path.basename(path)}")
    try:
        with open(temporary, "w") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:  # No temporary file is left behind.
        if os.path.lexists(temporary):
            os.remove(temporary)
        raise
