"""Which exports keras_caps wrote: the manifest each export carries.

An export (a SavedModel or ONNX folder) holds `keras_caps_export.json`,
its manifest: every file under it with its size and SHA-256, and every
subfolder. A folder is an export of keras_caps only while it holds exactly
that, unchanged (`is_keras_caps_export`, which `predict` and `evaluate`
also ask before they load one); only then may a later export or
`train --fresh` replace it (`check_export_target`). Anything else, a
user's file added inside included, is never deleted.
"""

import json
import os

from keras_caps.inference.export_contents import MARKER
from keras_caps.inference.export_contents import file_fingerprint
from keras_caps.inference.export_contents import file_tree
from keras_caps.inference.export_contents import is_keras_caps_export


def write_marker(folder, record):
    """Writes `MARKER` in `folder`, listing every file and folder under it.

    `files` lists the top-level names, `contents` each file's size and
    SHA-256 (by its `/`-separated relative path) and `folders` every
    subfolder.
    """
    tree = file_tree(folder)
    if tree is None:  # TensorFlow wrote a link or a device file.
        raise ValueError(f"The export in {folder!r} holds something other "
                         "than files and folders.")
    folders, files = tree
    record = dict(record,
                  files=sorted(set(os.listdir(folder)) | {MARKER}),
                  folders=sorted(folders),
                  contents={name: file_fingerprint(path)
                            for name, path in sorted(files.items())})
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as file:
        json.dump(record, file, indent=2)


def _earlier_export(path):
    """What wrote `path` when it holds an export of keras_caps 0.1.0 from
    before the marker recorded every file (`"keras_caps 0.1.0"`), else
    `None`."""
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as file:
            marker = json.load(file)
    except (OSError, ValueError):
        return None
    if (not isinstance(marker, dict) or "files" not in marker
            or "contents" in marker or "folders" in marker):
        return None
    return f"keras_caps {marker.get('keras_caps_version', '0.1.0')}"


def check_export_target(path, overwrite=False, model_path=None):
    """Raises a `ValueError` unless an export may be written at `path`.

    Allowed: a path that does not exist, an empty folder, and (only with
    `overwrite=True`) a previous export of keras_caps (see
    `is_keras_caps_export`). Refused: a file, a link, a folder holding
    anything else (a SavedModel from elsewhere included, and an export of
    keras_caps 0.1.0 whose marker does not record its files), the current
    folder or one above it, and `model_path`, its folder or one above it.
    """
    real = os.path.realpath(path)

    def within(folder, inner):
        inner = os.path.realpath(inner)
        return os.path.commonpath([folder, inner]) == folder

    prefix = f"Refusing to export to {path!r}:"
    if model_path is not None and within(real, model_path):
        raise ValueError(f"{prefix} it holds the model file {model_path!r}; "
                         "choose a new folder for the export.")
    if within(real, os.getcwd()):
        raise ValueError(f"{prefix} it is the current folder or one above "
                         "it; choose a new folder for the export.")
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        raise ValueError(f"{prefix} it exists and is not a folder; choose a "
                         "new folder for the export.")
    if not os.listdir(path):
        return
    if is_keras_caps_export(path):
        if overwrite:
            return
        raise ValueError(f"{prefix} it holds a previous export; pass "
                         "`--overwrite` (`overwrite=True`) to replace it.")
    earlier = _earlier_export(path)
    if earlier is not None:
        raise ValueError(
            f"{prefix} it holds an export written by {earlier}, whose "
            f"`{MARKER}` does not record its files; keras_caps 0.2.0 does "
            "not replace it: delete it yourself or choose a new folder.")
    raise ValueError(f"{prefix} the folder is not empty and is not an export "
                     "written by keras_caps (a previous export holds "
                     f"`{MARKER}` and, in every subfolder, only the files "
                     "it lists, unchanged); keras_caps never deletes files "
                     "it did not write. Choose a new or empty folder.")
