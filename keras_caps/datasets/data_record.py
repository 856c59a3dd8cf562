"""What a built-in dataset's data is, as run and comparison records keep it.

`data_record(dataset, data_dir)` describes the data a loader of
`keras_caps.datasets` reads, by content rather than by path, so that two
records are equal exactly when the data is:

- with a data folder (`data_dir`, else `$KERAS_CAPS_DATA_DIR`) and a
  dataset read from MNIST-format IDX files (`mnist`, `fashion_mnist`,
  `mnist_canvas`, `multi_mnist`): the four files' names, sizes and
  SHA-256 (`{"files": {name: {"bytes": ..., "sha256": ...}}}`). Where the
  folder is does not matter: byte-identical files elsewhere are the same
  data;
- otherwise (TFDS): `{"tfds": {"name": ..., "version": ..., "data_dir":
  <the absolute TFDS data directory it is read from>}}`. TFDS shards are
  not hashed: a prepared version's data does not change.

TensorFlow-free at import: TFDS is imported only to read a TFDS
dataset's version.
"""

import hashlib
import os

from keras_caps.datasets import idx
from keras_caps.datasets.dataset_info import DATASETS

# `keras_caps.datasets.sources.DATA_DIR_ENV` (sources imports TFDS).
_DATA_DIR_ENV = "KERAS_CAPS_DATA_DIR"
_IDX_NAMES = tuple(sorted(name for pair in idx.IDX_FILES.values()
                          for name in pair))


def data_record(dataset, data_dir=None):
    """What the data of a built-in `dataset` is (see the module).

    Args:
        dataset: str. A key of `keras_caps.datasets.DATASETS`.
        data_dir: str or `None`. The data folder (else
            `$KERAS_CAPS_DATA_DIR`, else TFDS).

    Returns:
        dict. `{"files": ...}` for IDX files, `{"tfds": ...}` otherwise.

    Raises:
        ValueError: an unknown dataset, or a data folder without the four
            IDX files (naming the folder and the missing file).

    Example:

    ```python
    record = data_record("mnist", "data/mnist")
    record["files"]["t10k-labels-idx1-ubyte.gz"]["sha256"]
    ```
    """
    if dataset not in DATASETS:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(DATASETS)}. "
            f"Received: dataset={dataset!r}")
    info = DATASETS[dataset]
    folder = os.fspath(data_dir) if data_dir is not None else (
        os.environ.get(_DATA_DIR_ENV) or None)
    if folder is None or info.idx_folder is None:
        return {"tfds": _tfds_record(info.tfds_name, folder)}
    files_folder = os.path.join(folder, info.idx_folder)
    if not os.path.isdir(files_folder):
        files_folder = folder
    files = {}
    for name in _IDX_NAMES:
        path = _idx_file(files_folder, name, dataset)
        files[os.path.basename(path)] = _fingerprint(path)
    return {"files": files}


def _tfds_record(name, folder):
    import tensorflow_datasets as tfds

    if folder is None:
        folder = (os.environ.get("TFDS_DATA_DIR")
                  or tfds.core.constants.DATA_DIR)
    return {"name": name, "version": str(tfds.builder_cls(name).VERSION),
            "data_dir": os.path.abspath(os.path.expanduser(folder))}


def _idx_file(folder, name, dataset):
    """The path of the IDX file `name` in `folder` (or its uncompressed
    copy), as `keras_caps.datasets.idx` finds it."""
    for candidate in (name, name[:-len(".gz")]):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    raise ValueError(
        f"Missing IDX file {name!r} in {folder!r}: the {dataset!r} data "
        f"folder must hold the four MNIST-format files {list(_IDX_NAMES)} "
        f"(or a {DATASETS[dataset].idx_folder!r} subfolder holding them). "
        f"Received: data_dir={folder!r}")


def _fingerprint(path):
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        size = os.path.getsize(path)
    except OSError as error:
        raise OSError(error.errno, f"Cannot read {path!r}: "
                      f"{error.strerror}") from None
    return {"bytes": size, "sha256": digest.hexdigest()}


def data_differences(before, now):
    """What differs between two `data_record`s, one short phrase each.

    Args:
        before: dict. The recorded data.
        now: dict. The data at hand.

    Returns:
        list of str, empty when the data is the same.

    Example:

    ```python
    data_differences(record, data_record("mnist", "other/mnist"))
    # ['t10k-labels-idx1-ubyte.gz: 10008 bytes, SHA-256 9f2a0c1e5b7d... '
    #  'then; 10008 bytes, SHA-256 04c1e8a37b2f... now']
    ```
    """
    if before == now:
        return []
    if "files" in before and "files" in now:
        return [f"{name}: {_file_text(before['files'].get(name))} then; "
                f"{_file_text(now['files'].get(name))} now"
                for name in sorted(set(before["files"]) | set(now["files"]))
                if before["files"].get(name) != now["files"].get(name)]
    if "tfds" in before and "tfds" in now:
        return [f"TFDS {key}: {before['tfds'].get(key)!r} then, "
                f"{now['tfds'].get(key)!r} now"
                for key in sorted(set(before["tfds"]) | set(now["tfds"]))
                if before["tfds"].get(key) != now["tfds"].get(key)]
    return [f"{_kind(before)} then, {_kind(now)} now"]


def _file_text(fingerprint):
    if not isinstance(fingerprint, dict):
        return "absent"
    return (f"{fingerprint.get('bytes')} bytes, SHA-256 "
            f"{str(fingerprint.get('sha256'))[:12]}...")


def _kind(record):
    if isinstance(record, dict) and "files" in record:
        return "IDX files of a data folder"
    if isinstance(record, dict) and "tfds" in record:
        return "TFDS data"
    return f"an unknown data record {record!r}"
