"""What an export of keras_caps holds: the manifest it carries.

An export (a SavedModel or ONNX folder) holds `keras_caps_export.json`
(`MARKER`): every file under it with its size and SHA-256, and every
subfolder (written by `keras_caps.runs.export_manifest.write_marker`). A
folder is an export of keras_caps only while it holds exactly that,
unchanged (`is_keras_caps_export`): `ExportedClassifier` loads nothing
else, and only such a folder may be replaced by a later export.

The manifest records what keras_caps wrote; it does not prove who wrote
it (anyone can write one), and a SavedModel is a program: load only
exports you trust.
"""

import hashlib
import json
import os

MARKER = "keras_caps_export.json"
"""The file every export carries, naming what keras_caps wrote there."""


def file_tree(folder):
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


def file_fingerprint(path):
    """`{"size", "sha256"}` of the file at `path`."""
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
    tree = file_tree(path)
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
        return all(file_fingerprint(path) == contents[name]
                   for name, path in files.items())
    except (OSError, AttributeError):
        return False
