"""`until_accuracy` (`--until-accuracy`): train until a validation accuracy
(Sabour et al. 2017, section 5.2: models compared at matched accuracy)."""

import csv
import json
import os

import keras
import numpy as np
import pytest

from keras_caps import cli
from keras_caps import training
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.training import fit_and_select
from keras_caps.training import resume_plan
from keras_caps.training.accuracy_target import AccuracyTarget
from keras_caps.training.accuracy_target import first_epoch_reaching
from keras_caps.training.training_settings import TrainingSettings

pytestmark = pytest.mark.single_backend


@pytest.mark.parametrize("value, error, message", [
    (0.0, ValueError, "until_accuracy=0.0"),
    (1.0, ValueError, "until_accuracy=1.0"),
    (1.5, ValueError, "strictly between 0 and 1"),
    (float("nan"), ValueError, "until_accuracy=nan"),
    (True, TypeError, "until_accuracy=True"),
    ("0.9", TypeError, "until_accuracy='0.9'"),
])
def test_a_target_outside_zero_one_is_refused(value, error, message):
    with pytest.raises(error, match=message):
        TrainingSettings(until_accuracy=value)


def test_a_target_on_the_test_set_is_refused():
    with pytest.raises(ValueError, match="validation='test'"):
        TrainingSettings(until_accuracy=0.9, validation="test")


def test_the_target_is_recorded_and_older_records_have_none():
    settings = TrainingSettings(epochs=3, until_accuracy=0.95).resolve()
    record = settings.to_record()
    assert record["until_accuracy"] == 0.95
    assert TrainingSettings.from_record(record) == settings
    # A record written before the target existed: no target, and the
    # record is written back without the key (so the run still resumes).
    del record["until_accuracy"]
    older = TrainingSettings.from_record(record)
    assert older.until_accuracy is None
    assert "until_accuracy" not in older.to_record()


def test_the_cli_refuses_a_bad_target_naming_it(tmp_path, capsys):
    status = cli.main(["train", "--until-accuracy", "1.2", "--output-dir",
                       str(tmp_path / "run")])
    assert status == 2
    assert "until_accuracy=1.2" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


class _Optimizer:
    def __init__(self):
        self.iterations = keras.Variable(0, dtype="int64")


class _Model:
    """What the callback reads: `stop_training` and the optimizer's step."""

    def __init__(self):
        self.stop_training = False
        self.optimizer = _Optimizer()


def test_the_callback_stops_at_the_first_epoch_reaching_the_target():
    # Hand-worked: 0.5, 0.79 stay below 0.8; epoch 3 (0.8) reaches it.
    target = AccuracyTarget(0.8)
    model = _Model()
    target.set_model(model)
    for epoch, value in enumerate([0.5, 0.79, 0.8, 0.95]):
        model.optimizer.iterations.assign(5 * (epoch + 1))
        target.on_epoch_end(epoch, {"val_accuracy": value, "loss": 1.0})
        if model.stop_training:
            break
    assert target.reached == {"epoch": 3, "step": 15, "accuracy": 0.8}
    assert target.monitor == "val_accuracy"


def test_a_target_never_reached_leaves_training_running():
    # The validation set holds each image twice with two labels: no model
    # is right on more than half of it, so 0.6 is out of reach.
    rng = np.random.default_rng(0)
    images = rng.normal(size=(8, 4)).astype("float32")
    validation = (np.concatenate([images, images]),
                  np.concatenate([np.zeros(8), np.ones(8)]).astype("int32"))
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(True),
                  metrics=["accuracy"])
    target = AccuracyTarget(0.6)
    history = model.fit(images, np.zeros(8, "int32"), epochs=3,
                        validation_data=validation, callbacks=[target],
                        verbose=0)
    assert target.reached is None
    assert len(history.history["val_accuracy"]) == 3


def test_the_history_of_an_earlier_process_is_read(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_length_accuracy\n0,1.0,0.4\n"
                    "1,0.8,0.91\n2,0.7,0.95\n")
    # The first row at or above 0.9 is epoch 1 (0-based): epoch 2.
    assert first_epoch_reaching(str(path), 0.9, before_epoch=3) == {
        "epoch": 2, "accuracy": 0.91}
    # Rows the resumed run trains again do not count.
    assert first_epoch_reaching(str(path), 0.9, before_epoch=1) is None
    assert first_epoch_reaching(str(path), 0.99, before_epoch=3) is None
    assert first_epoch_reaching(str(tmp_path / "none.csv"), 0.9, 3) is None
    # A run resumed after its target was reached records where, the step
    # from the epoch's length.
    target = AccuracyTarget(0.9)
    assert fit_and_select._target_record(
        target, {"epoch": 2, "accuracy": 0.91}, 6) == {
        "until_accuracy": {"target": 0.9, "reached": True, "epoch": 2,
                           "step": 12, "accuracy": 0.91}}
    assert fit_and_select._target_record(target, None, 6)["until_accuracy"][
        "reached"] is False


def _history(output_dir):
    with open(os.path.join(output_dir, "history.csv")) as file:
        return list(csv.DictReader(file))


def test_train_stops_at_the_target_and_is_never_retrained(tmp_path):
    # Every image of one class: the CNN soon predicts that class for all
    # of them, so the validation accuracy reaches 0.9 within 8 epochs.
    images, _ = synthetic_digits(96, seed=0)
    labels = np.full(96, 3)
    data_dir = write_idx_dataset(str(tmp_path / "mnist"), (images, labels),
                                 (images[:16], labels[:16]))
    output_dir = str(tmp_path / "run")
    kwargs = dict(output_dir=output_dir, data_dir=data_dir, epochs=8,
                  steps_per_epoch=2, batch_size=8, until_accuracy=0.9,
                  verbose=0)
    record = training.train("cnn", "mnist", **kwargs)
    rows = _history(output_dir)
    values = [float(row["val_accuracy"]) for row in rows]
    # Independently, from the log: the first epoch at or above 0.9 ends
    # the run.
    first = next(index for index, value in enumerate(values)
                 if value >= 0.9) + 1
    assert len(rows) == first < 8
    assert record["until_accuracy"] == {
        "target": 0.9, "reached": True, "epoch": first, "step": 2 * first,
        "accuracy": values[first - 1]}
    assert record["selected_epoch"] == first
    assert record["train_steps_total"] == 2 * first
    with open(os.path.join(output_dir, "run.json")) as file:
        assert json.load(file)["settings"]["until_accuracy"] == 0.9
    # The same command again: finished, not trained again.
    modified = os.path.getmtime(os.path.join(output_dir, "model.keras"))
    assert training.train("cnn", "mnist", **kwargs) == record
    assert os.path.getmtime(
        os.path.join(output_dir, "model.keras")) == modified
    # Another target in the same folder: refused, nothing changed.
    with pytest.raises(ValueError, match="until_accuracy"):
        training.train("cnn", "mnist",
                       **{**kwargs, "until_accuracy": 0.5})


def test_a_run_resumed_after_reaching_its_target_trains_no_more(tmp_path):
    # The run resumes at epoch 2 (0-based) and its log shows the target
    # reached at the second epoch (0-based 1): nothing trains, and a row
    # past the resumed epoch (which a resumed run would train again) goes.
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_accuracy\n0,1.0,0.4\n1,0.8,0.92\n"
                    "2,0.7,0.95\n")
    reached = resume_plan._target_reached_before(
        AccuracyTarget(0.9), str(tmp_path), epoch=2)
    assert reached == {"epoch": 2, "accuracy": 0.92}
    assert [row["epoch"] for row in _history(str(tmp_path))] == ["0", "1"]
    assert resume_plan._target_reached_before(None, str(tmp_path), 2) is None
    # Killed after the second epoch's log row but before its backup: the
    # run resumes at epoch 1, where the target was not reached yet, and
    # trains that epoch again.
    assert resume_plan._target_reached_before(
        AccuracyTarget(0.9), str(tmp_path), epoch=1) is None
