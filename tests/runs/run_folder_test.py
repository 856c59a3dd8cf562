"""A run's output folder: settings check, resume to the last artifact,
`fresh`, and clear errors for folders and data that cannot be used (#16).

One tiny run is trained once per module and copied for each test.
"""

import csv
import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_caps import cli
from keras_caps import training
from keras_caps.datasets.data_record import data_record
from keras_caps.runs.run_folder import RunFolder
from keras_caps.runs.run_folder import describe_differences
from keras_caps.runs.run_folder import empty_new_folders_removed_on_error
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.training import TrainingSettings

ARGUMENTS = dict(epochs=2, batch_size=16, steps_per_epoch=3, verbose=0)


def _history_epochs(folder):
    with open(os.path.join(folder, "history.csv")) as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


def _modification_times(folder):
    return {os.path.relpath(os.path.join(root, name), folder):
            os.stat(os.path.join(root, name)).st_mtime_ns
            for root, _, names in os.walk(folder) for name in names}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("finished")
    data_dir = write_idx_dataset(str(base / "mnist"),
                                 synthetic_digits(100, seed=0),
                                 synthetic_digits(20, seed=1))
    output_dir = str(base / "run")
    record = training.train(output_dir=output_dir, data_dir=data_dir,
                            **ARGUMENTS)
    return data_dir, output_dir, record


@pytest.fixture
def run_copy(finished_run, tmp_path):
    data_dir, output_dir, record = finished_run
    copy = str(tmp_path / "run")
    shutil.copytree(output_dir, copy)
    return data_dir, copy, record


def test_a_finished_run_records_its_settings_and_what_ran(finished_run):
    _, output_dir, record = finished_run
    with open(os.path.join(output_dir, "run.json")) as file:
        run = json.load(file)
    assert run["settings"]["seed"] == 42
    assert run["settings"]["steps_per_epoch"] == 3
    assert run["settings"]["reconstruction"] is True
    assert run["progress"]["complete"] is True
    assert record["train_steps_per_epoch"] == 3
    assert sorted(os.listdir(output_dir)) == [
        "checkpoints", "export", "history.csv", "logs", "metrics.json",
        "model.keras", "run.json"]  # No backup, lock or temporary left.


def test_rerunning_a_finished_run_changes_nothing(run_copy, caplog):
    data_dir, output_dir, record = run_copy
    before = _modification_times(output_dir)
    caplog.set_level("INFO")
    again = training.train(output_dir=output_dir, data_dir=data_dir,
                           **ARGUMENTS)
    assert again == json.loads(json.dumps(record))
    assert "already complete" in caplog.text
    assert _modification_times(output_dir) == before


def test_other_settings_are_refused_and_nothing_changes(run_copy):
    data_dir, output_dir, _ = run_copy
    before = _modification_times(output_dir)
    with pytest.raises(ValueError) as info:
        training.train(output_dir=output_dir, data_dir=data_dir,
                       **{**ARGUMENTS, "steps_per_epoch": 2}, seed=7)
    message = str(info.value)
    assert "seed: 42 in the folder, 7 now" in message
    assert "steps_per_epoch: 3 in the folder, 2 now" in message
    assert "epochs" not in message and "--fresh" in message
    with pytest.raises(ValueError, match="reconstruction: true in the "
                       "folder, false now"):
        training.train(output_dir=output_dir, data_dir=data_dir,
                       reconstruction=False, **ARGUMENTS)
    assert _modification_times(output_dir) == before


def test_fresh_deletes_only_what_a_run_wrote(run_copy):
    data_dir, output_dir, _ = run_copy
    with open(os.path.join(output_dir, "notes.txt"), "w") as file:
        file.write("keep me")
    old = keras.saving.load_model(os.path.join(output_dir, "model.keras"))
    record = training.train(output_dir=output_dir, data_dir=data_dir,
                            **{**ARGUMENTS, "epochs": 1}, seed=7,
                            fresh=True)
    assert record["seed"] == 7 and record["epochs"] == 1
    assert _history_epochs(output_dir) == [0]  # No row of the old run.
    new = keras.saving.load_model(os.path.join(output_dir, "model.keras"))
    assert not all(np.array_equal(a, b)
                   for a, b in zip(old.get_weights(), new.get_weights()))
    with open(os.path.join(output_dir, "run.json")) as file:
        assert json.load(file)["settings"]["seed"] == 7
    with open(os.path.join(output_dir, "notes.txt")) as file:
        assert file.read() == "keep me"


def test_a_crash_after_training_finishes_only_what_is_missing(
        run_copy, monkeypatch):
    """A run stopped before its export: the rerun does not train again."""
    data_dir, output_dir, _ = run_copy
    record_path = os.path.join(output_dir, "run.json")
    with open(record_path) as file:
        run = json.load(file)
    for stage in ("exported", "complete"):
        del run["progress"][stage]
    with open(record_path, "w") as file:
        json.dump(run, file)
    os.remove(os.path.join(output_dir, "metrics.json"))
    os.makedirs(os.path.join(output_dir, ".export-x1y2"))  # Killed export.
    model_time = os.stat(os.path.join(output_dir, "model.keras")).st_mtime_ns
    exported = os.path.join(output_dir, "export", "saved_model.pb")
    export_time = os.stat(exported).st_mtime_ns

    def no_fit(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(keras.Model, "fit", no_fit)
    monkeypatch.setattr(keras.Model, "evaluate", no_fit)
    record = training.train(output_dir=output_dir, data_dir=data_dir,
                            **ARGUMENTS)
    assert record["test"] == run["progress"]["test"]
    # The earlier export of this run is replaced.
    assert os.stat(exported).st_mtime_ns != export_time
    assert os.path.exists(os.path.join(output_dir, "metrics.json"))
    assert os.stat(os.path.join(output_dir, "model.keras")
                   ).st_mtime_ns == model_time
    assert _history_epochs(output_dir) == [0, 1]
    assert not [name for name in os.listdir(output_dir)
                if name.startswith(".")]


# The `settings` of a run.json written before `TrainingSettings` (keras_caps
# 0.2 and earlier), for the run of `ARGUMENTS`, key by key as written then.
RUN_JSON_SETTINGS_BEFORE_TRAINING_SETTINGS = {
    "model": "efficient_capsnet", "dataset": "mnist",
    "protocol": "holdout (model selected on 10% of the training data)",
    "epochs": 2, "steps_per_epoch": 3, "batch_size": 16,
    "precision": "float32", "seed": 42, "reconstruction": True,
    "deterministic": False, "dataset_options": {},
}


def test_a_run_json_written_before_training_settings_is_resumed(
        run_copy, monkeypatch, caplog):
    """An older run.json reads as the same settings: the run is not
    refused and, stopped before its export, is finished without
    training."""
    data_dir, output_dir, _ = run_copy
    old_settings = RUN_JSON_SETTINGS_BEFORE_TRAINING_SETTINGS
    assert TrainingSettings.from_record(old_settings) == TrainingSettings(
        epochs=2, batch_size=16, steps_per_epoch=3).resolve()
    record_path = os.path.join(output_dir, "run.json")
    with open(record_path) as file:
        progress = json.load(file)["progress"]
    # Complete: nothing to do, nothing rewritten.
    with open(record_path, "w") as file:
        json.dump({"settings": old_settings, "progress": progress}, file)
    before = _modification_times(output_dir)
    caplog.set_level("INFO")
    training.train(output_dir=output_dir, data_dir=data_dir, **ARGUMENTS)
    assert "already complete" in caplog.text
    assert _modification_times(output_dir) == before
    # Stopped before the export: finished, without training again.
    unfinished = {key: value for key, value in progress.items()
                  if key not in ("exported", "complete")}
    with open(record_path, "w") as file:
        json.dump({"settings": old_settings, "progress": unfinished}, file)

    def no_fit(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(keras.Model, "fit", no_fit)
    monkeypatch.setattr(keras.Model, "evaluate", no_fit)
    record = training.train(output_dir=output_dir, data_dir=data_dir,
                            **ARGUMENTS)
    assert record["test"] == progress["test"]
    with open(record_path) as file:
        run = json.load(file)
    # The data it resumed on is recorded from now on (#27).
    assert run["settings"] == {**old_settings,
                               "data": data_record("mnist", data_dir)}
    assert run["progress"]["complete"] is True
    assert record["data"] == run["settings"]["data"]


def test_a_run_resumes_on_the_same_files_only(run_copy, tmp_path,
                                               monkeypatch):
    """The data is recorded by content (#27): other files are refused
    before anything is written, the same files in another folder resume
    the run."""
    data_dir, output_dir, _ = run_copy
    record_path = os.path.join(output_dir, "run.json")
    with open(record_path) as file:
        run = json.load(file)
    assert run["settings"]["data"] == data_record("mnist", data_dir)
    assert "data_dir" not in json.dumps(run["settings"]["data"])
    # Stopped before its export, as a killed run.
    for stage in ("exported", "complete"):
        del run["progress"][stage]
    with open(record_path, "w") as file:
        json.dump(run, file)
    os.remove(os.path.join(output_dir, "metrics.json"))
    before = _modification_times(output_dir)
    other = write_idx_dataset(str(tmp_path / "other"),
                              synthetic_digits(100, seed=0),
                              synthetic_digits(20, seed=5))
    with pytest.raises(ValueError) as info:
        training.train(output_dir=output_dir, data_dir=other, **ARGUMENTS)
    message = str(info.value)
    assert "not what the run" in message and "\n" not in message
    assert "t10k-images-idx3-ubyte.gz: " in message
    assert _modification_times(output_dir) == before

    def no_fit(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(keras.Model, "fit", no_fit)
    monkeypatch.setattr(keras.Model, "evaluate", no_fit)
    moved = str(tmp_path / "moved")
    shutil.copytree(data_dir, moved)
    record = training.train(output_dir=output_dir, data_dir=moved,
                            **ARGUMENTS)
    assert record["data"] == run["settings"]["data"]
    # Complete now; other data is still refused.
    with pytest.raises(ValueError, match="not what the run"):
        training.train(output_dir=output_dir, data_dir=other, **ARGUMENTS)


def test_files_of_an_unknown_run_are_refused(tmp_path):
    output_dir = tmp_path / "run"
    output_dir.mkdir()
    (output_dir / "history.csv").write_text("epoch,loss\n0,1.0\n")
    (output_dir / "logs").mkdir()
    (output_dir / "logs" / "mine.txt").write_text("a user's file")
    for fresh in (False, True):
        # Without a run record nothing tells these files are a run's:
        # refused, and `fresh` deletes none of them either.
        with pytest.raises(ValueError, match="history.csv.*no run.json"):
            RunFolder(str(output_dir), {"seed": 1}).open(fresh=fresh)
        assert sorted(os.listdir(output_dir)) == ["history.csv", "logs"]
        assert os.listdir(output_dir / "logs") == ["mine.txt"]
    (output_dir / "run.json").write_text("{garbage")
    with pytest.raises(ValueError, match="run.json.*unreadable"):
        RunFolder(str(output_dir), {"seed": 1}).open()
    # An unreadable record is still a run's: `fresh` starts over.
    assert RunFolder(str(output_dir), {"seed": 1}).open(fresh=True) == {}
    assert json.loads((output_dir / "run.json").read_text())[
        "settings"] == {"seed": 1}


def test_describe_differences():
    assert describe_differences(
        {"seed": 1, "epochs": 3, "model": "a"},
        {"seed": 2, "epochs": 3, "precision": "float32"}) == [
        'model: "a" in the folder, <unset> now',
        'precision: <unset> in the folder, "float32" now',
        "seed: 1 in the folder, 2 now"]


@pytest.mark.parametrize("num_train, arguments, message", [
    (10, {}, "'train' split of 'mnist' yields no batch of batch_size=16: "
     "it has fewer examples than one batch"),
    (100, {"steps_per_epoch": 6}, "`steps_per_epoch` is larger than one "
     "epoch of the 'train' split of 'mnist', which has 5 batches"),
])
def test_too_little_data_is_a_clear_error(tmp_path, num_train, arguments,
                                          message):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(num_train),
                                 synthetic_digits(20))
    with pytest.raises(ValueError) as info:
        training.train(output_dir=str(tmp_path / "run"), data_dir=data_dir,
                       epochs=1, batch_size=16, **arguments)
    assert message in str(info.value)
    assert not os.path.exists(tmp_path / "run" / "model.keras")


def test_an_empty_test_set_is_a_clear_error(tmp_path):
    data_dir = write_idx_dataset(
        str(tmp_path / "mnist"), synthetic_digits(40),
        (np.zeros((0, 28, 28), "uint8"), np.zeros((0,), "uint8")))
    with pytest.raises(ValueError, match="'test' split of 'mnist' yields no "
                       "batch of batch_size=16: it has no examples"):
        training.train(output_dir=str(tmp_path / "run"), data_dir=data_dir,
                       epochs=1, batch_size=16)


def test_unusable_output_folders_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "a_file").write_text("keep me")
    for output_dir, message in (
            (tmp_path / "a_file", "exists and is not a folder"),
            (tmp_path / "a_file" / "run", "Cannot create the output folder: "
             "Not a directory")):
        code = cli.main(["train", "--output-dir", str(output_dir),
                         "--epochs", "1"])
        error = capsys.readouterr().err
        assert code == 2, error
        assert error.count("\n") == 1 and message in error, error
        assert error.startswith("keras-caps train: error:")
    assert (tmp_path / "a_file").read_text() == "keep me"


@pytest.mark.parametrize("arguments", [
    ["--partners-per-digit", "5"],  # an option mnist does not take
    ["--strategy", "tpu"],  # no TPU here
    ["--strategy", "multi_worker"],  # no TF_CONFIG
    ["--model", "efficient_capsnet", "--dataset", "smallnorb",
     "--no-download"],  # not prepared in the data folder
], ids=["dataset_option", "tpu", "multi_worker", "unprepared_dataset"])
def test_a_refused_command_creates_no_output_folder(tmp_path, capsys,
                                                    monkeypatch, arguments):
    """#41, item 9: these refusals came after the folder was made."""
    monkeypatch.delenv("TF_CONFIG", raising=False)
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(16), synthetic_digits(8))
    output_dir = tmp_path / "new" / "run"
    code = cli.main(["train", "--data-dir", data_dir, "--output-dir",
                     str(output_dir), "--epochs", "1", *arguments])
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.startswith("keras-caps train: error:"), error
    assert not (tmp_path / "new").exists()


def test_a_refusal_removes_only_the_empty_folders_it_created(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(ValueError, match="refused"):
        with empty_new_folders_removed_on_error(mine / "a" / "b" / "c"):
            os.makedirs(mine / "a" / "b" / "c")
            (mine / "a" / "note.txt").write_text("keep me")
            raise ValueError("refused")
    # b/c were new and empty; a holds a file; mine was there before.
    assert sorted(os.listdir(mine)) == ["a"]
    assert os.listdir(mine / "a") == ["note.txt"]
    with pytest.raises(ValueError, match="refused"):
        with empty_new_folders_removed_on_error(mine / "a"):
            raise ValueError("refused")
    assert (mine / "a" / "note.txt").read_text() == "keep me"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs an unprivileged POSIX user")
def test_a_read_only_output_folder_is_a_one_line_error(tmp_path, capsys):
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert cli.main(["train", "--output-dir", str(folder)]) == 2
    finally:
        folder.chmod(0o755)
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "not writable" in error, error
    assert os.listdir(folder) == []


def test_fresh_keeps_user_files_inside_the_runs_folders(run_copy):
    data_dir, output_dir, _ = run_copy
    mine = {os.path.join("checkpoints", "my_notes.txt"): "keep",
            os.path.join("backup", "copy", "weights.h5"): "keep too",
            os.path.join("logs", "train", "my_plot.png"): "and me"}
    for relative, text in mine.items():
        path = os.path.join(output_dir, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as file:
            file.write(text)
    old_events = [name for name in os.listdir(
        os.path.join(output_dir, "logs", "train"))
        if name.startswith("events.out.tfevents.")]
    assert old_events  # The run wrote TensorBoard events there.
    # As a run on data a user brings leaves it beside its model.
    stale_names = os.path.join(output_dir, "class_names.json")
    with open(stale_names, "w") as file:
        json.dump(["cat", "dog"], file)
    training.train(output_dir=output_dir, data_dir=data_dir,
                   **{**ARGUMENTS, "epochs": 1}, seed=7, fresh=True)
    for relative, text in mine.items():
        with open(os.path.join(output_dir, relative)) as file:
            assert file.read() == text
    # The earlier run's own files in those folders are gone.
    assert not set(old_events) & set(
        os.listdir(os.path.join(output_dir, "logs", "train")))
    assert _history_epochs(output_dir) == [0]
    # An MNIST run writes no class names: the earlier run's are gone.
    assert not os.path.exists(stale_names)
