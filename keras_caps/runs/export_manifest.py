"""Which exports keras_caps wrote: the manifest each export carries.

An export (a SavedModel or ONNX folder) holds `keras_caps_export.json`,
its manifest: every file under it with its size and SHA-256, and every
subfolder. A folder is an export of keras_caps only while it holds exactly
that, unchanged (`is_keras_caps_export`); only then may a later export or
`train --fresh` replace it (`check_export_target`). Anything else, a
user's file added inside included, is never deleted.
"""

import hashlib
import json
import os

MARKER = "keras_caps_export.json"
"""The file every export carries, naming what keras_caps wrote there."""


def write_marker(folder, record):
    """Writes `MARKER` in `folder`, listing every file and folder under it.

    `files` lists the top-level names, `contents` each file's size and
    SHA-256 (by its `/`-separated relative path) and `folders` every
    subfolder.
    """
    tree = _tree(folder)
    if tree is None:  # TensorFlow wrote a link or a device file.
        raise ValueError(f"The export in {folder!r} holds something other "
                         "than files and folders.")
    folders, files = tree
    record = dict(record,
                  files=sorted(set(os.listdir(folder)) | {MARKER}),
                  folders=sorted(folders),
                  contents={name: _fingerprint(path)
                            for name, path in sorted(files.items())})
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as file:
        json.dump(record, file, indent=2)


def _tree(folder):
    """`(folders, files)` under `folder`: the set of subfolders and a dict
    of files, both by `/`-separated relative path; `None` if it holds a
    link or anything but files and folders."""
    folders, files = set(), {}
    for root, subfolders, names in os.walk(folder):
        relative = os.path.relpath(root, folder)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        for name in subfolders:
            if os.path.islink(os.path.join(root, name)):
                return None
            folders.add(prefix + name)
        for name in names:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                return None
            files[prefix + name] = path
    return folders, files


def _fingerprint(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return {"size": os.path.getsize(path), "sha256": digest.hexdigest()}


def is_keras_caps_export(path):
    """Whether `path` is a folder holding an export of keras_caps only.

    That is: it holds a readable `keras_caps_export.json` marker, every
    file under it, at any depth, is one that marker lists, with the size
    and SHA-256 it recorded, and every folder is one it lists (a file or
    folder added, a file removed, replaced or edited anywhere makes the
    folder not an export of keras_caps, so that nothing in it is ever
    deleted or replaced; only a listed empty folder may be missing). Links
    are never ours.

    An export of keras_caps 0.1.0 written before the marker recorded
    every file (its marker lists only the top-level names) is not one:
    `check_export_target` refuses it with one line.

    Example:

    ```python
    export_inference_model(model, "export")
    is_keras_caps_export("export")  # True
    open("export/assets/labels.txt", "w").close()
    is_keras_caps_export("export")  # False: labels.txt is not ours.
    ```
    """
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as file:
            marker = json.load(file)
        written = set(marker["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    tree = _tree(path)
    if tree is None or MARKER not in written:
        return False
    folders, files = tree
    return _holds_only(marker, folders, files)


def _holds_only(marker, folders, files):
    """Whether `folders` and `files` are exactly what `marker` recorded."""
    try:
        contents = dict(marker["contents"])
        recorded_folders = set(marker["folders"])
    except (KeyError, TypeError, ValueError):
        return False
    files = {name: path for name, path in files.items() if name != MARKER}
    # A recorded folder may be missing (copy tools drop empty folders): no
    # file of anyone's is in it. Any other folder or file is not ours.
    if not folders <= recorded_folders or set(files) != set(contents):
        return False
    try:  # The sizes first: cheap, and they catch most changes.
        if any(os.path.getsize(path) != contents[name].get("size")
               for name, path in files.items()):
            return False
        return all(_fingerprint(path) == contents[name]
                   for name, path in files.items())
    except (OSError, AttributeError):
        return False


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
