"""Atomic writes on a full disk: the error names the file, nothing partial
is left (#27, defect 9)."""

import errno
import os

import keras
import pytest

from keras_caps.runs.atomic_files import save_model_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.atomic_files import write_text_atomically
from tests.tiny_disk import fill
from tests.tiny_disk import tiny_disk


class _FullDiskModel:
    """Writes half a model, then fails as `model.save` does on a full disk."""

    def save(self, path):
        with open(path, "wb") as file:
            file.write(b"PK\x03\x04 half a model")
        raise OSError(errno.ENOSPC, "No space left on device")


def _assert_names_path_and_leaves_nothing(error, path):
    assert error.errno == errno.ENOSPC
    assert error.filename == str(path)
    assert str(path) in str(error)
    assert "No space left on device" in str(error)
    assert os.listdir(os.path.dirname(path)) == []


@pytest.mark.single_backend
def test_a_failing_model_save_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "model.keras"
    with pytest.raises(OSError) as raised:
        save_model_atomically(_FullDiskModel(), str(path))
    _assert_names_path_and_leaves_nothing(raised.value, path)


@pytest.mark.single_backend
def test_a_failing_rename_names_the_destination(tmp_path, monkeypatch):
    from keras_caps.runs import atomic_files

    def failing_replace(source, target):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic_files.os, "replace", failing_replace)
    path = tmp_path / "metrics.json"
    with pytest.raises(PermissionError) as raised:
        write_json_atomically(str(path), {"a": 1})
    assert raised.value.filename == str(path)
    assert os.listdir(tmp_path) == []


@pytest.fixture
def full_disk(tmp_path):
    """A real filesystem (tmpfs) of 64 KiB, 4 KiB of it left free."""
    with tiny_disk(tmp_path / "disk", "64k") as folder:
        fill(folder, leave=4 << 10)
        yield folder


def test_writes_on_a_real_full_disk_name_the_file_and_leave_nothing(
        full_disk):
    text_path = full_disk / "results.md"
    with pytest.raises(OSError) as raised:
        write_text_atomically(str(text_path), "x" * (256 << 10))
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(text_path)
    assert str(text_path) in str(raised.value)

    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(512)])
    model_path = full_disk / "model.keras"
    with pytest.raises(OSError) as raised:
        save_model_atomically(model, str(model_path))
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(model_path)
    assert os.listdir(full_disk) == ["filler"]
