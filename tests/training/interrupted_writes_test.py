"""A write that fails half-way (a full disk) leaves the previous file as it
was, no temporary file, and an error naming the file (#27 review): the CSV
log trimmed on resume, `class_names.json` and compare's plot."""

import csv
import errno
import json
import os
import types

import matplotlib.figure
import pytest

from keras_caps.compare import comparison
from keras_caps.inference import class_names
from keras_caps.training import history_trim


def _disk_full(file):
    file.write("partial")
    raise OSError(errno.ENOSPC, "No space left on device")


def _check_unchanged(path, before, error):
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == [path.name]
    assert error.value.errno == errno.ENOSPC
    assert error.value.filename == str(path)


def test_trimming_the_history_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss\n0,0.9\n1,0.8\n")
    before = path.read_bytes()
    writer = types.SimpleNamespace(writerows=lambda rows: _disk_full(file))
    file = None

    def failing_writer(opened):
        nonlocal file
        file = opened
        return writer

    monkeypatch.setattr(history_trim, "csv", types.SimpleNamespace(
        reader=csv.reader, writer=failing_writer))
    with pytest.raises(OSError) as error:
        history_trim.trim_history(str(path), 1)
    _check_unchanged(path, before, error)


def test_writing_class_names_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "class_names.json"
    class_names.write_class_names(str(path), ["cat", "dog"])
    before = path.read_bytes()
    monkeypatch.setattr(class_names, "json", types.SimpleNamespace(
        dump=lambda names, file, indent: _disk_full(file)))
    with pytest.raises(OSError) as error:
        class_names.write_class_names(str(path), ["cat", "dog", "bird"])
    _check_unchanged(path, before, error)
    assert json.loads(before) == ["cat", "dog"]


def test_compare_plot_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "accuracy_vs_severity.png"
    path.write_bytes(b"the previous plot")
    before = path.read_bytes()

    def failing_savefig(figure, target, **kwargs):
        with open(target, "w") as file:
            _disk_full(file)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        failing_savefig)
    point = {"mean": 0.9, "std": 0.01}
    results = {"settings": {"corruptions": {"noise": [0.5], "pixels": [],
                                            "occlusion": []}},
               "routers": {"dynamic": {"accuracy": {
                   "clean": point, "noise:0.5": point}}}}
    with pytest.raises(OSError) as error:
        comparison.plot_accuracy_vs_severity(results, str(path))
    _check_unchanged(path, before, error)
