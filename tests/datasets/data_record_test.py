"""`data_record`: a built-in dataset's data by content, not by path (#27)."""

import hashlib
import os
import shutil

import pytest

from keras_caps.datasets.data_record import data_differences
from keras_caps.datasets.data_record import data_record
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def _idx_folder(folder, seed=0):
    return write_idx_dataset(folder, synthetic_digits(20, seed=seed),
                             synthetic_digits(10, seed=seed + 1))


@pytest.mark.single_backend
def test_idx_files_are_recorded_by_content(tmp_path, monkeypatch):
    folder = _idx_folder(str(tmp_path / "a"))
    record = data_record("mnist", folder)
    assert sorted(record) == ["files"]
    for name, fingerprint in record["files"].items():
        content = (tmp_path / "a" / name).read_bytes()
        assert fingerprint == {"bytes": len(content),
                               "sha256": hashlib.sha256(content).hexdigest()}
    # The same files elsewhere, or in the dataset's subfolder, or through
    # $KERAS_CAPS_DATA_DIR: the same data.
    shutil.copytree(folder, tmp_path / "b" / "mnist")
    assert data_record("mnist", str(tmp_path / "b")) == record
    monkeypatch.setenv("KERAS_CAPS_DATA_DIR", str(tmp_path / "b"))
    assert data_record("multi_mnist") == record
    other = data_record("mnist", _idx_folder(str(tmp_path / "c"), seed=5))
    changed = data_differences(record, other)
    assert len(changed) == 4 and all(" then; " in line for line in changed)
    assert data_differences(record, record) == []


@pytest.mark.single_backend
def test_tfds_datasets_are_recorded_by_name_version_and_folder(
        tmp_path, monkeypatch):
    monkeypatch.delenv("KERAS_CAPS_DATA_DIR", raising=False)
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    record = data_record("mnist")
    assert record["tfds"]["name"] == "mnist"
    assert record["tfds"]["data_dir"] == str(tmp_path / "tfds")
    assert record["tfds"]["version"]
    # smallnorb and CIFAR read a data folder as a TFDS data directory.
    cifar = data_record("cifar10", str(tmp_path / "elsewhere"))
    assert cifar["tfds"]["data_dir"] == str(tmp_path / "elsewhere")
    assert data_differences(record, {"tfds": {**record["tfds"],
                                              "version": "0.0.1"}}) == [
        f"TFDS version: {record['tfds']['version']!r} then, '0.0.1' now"]
    assert data_differences(record, {"files": {}}) == [
        "TFDS data then, IDX files of a data folder now"]


@pytest.mark.single_backend
def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Unknown `dataset`.*'imagenet'"):
        data_record("imagenet", str(tmp_path))
    folder = _idx_folder(str(tmp_path / "a"))
    os.remove(os.path.join(folder, "t10k-labels-idx1-ubyte.gz"))
    with pytest.raises(ValueError, match=r"Missing IDX file "
                       r"'t10k-labels-idx1-ubyte.gz' in '.*a'"):
        data_record("mnist", folder)
