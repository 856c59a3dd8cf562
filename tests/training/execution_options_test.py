"""The options of how a run executes (`steps_per_execution`,
`input_workers`, `time_budget`), refused before anything is written when
they cannot apply; the steps of a call of several; and `EpochClock`'s
progress lines and time budget, on a fake clock."""

import logging
import os
import types

import keras
import pytest

from keras_caps import cli
from keras_caps.datasets import numpy_pipeline
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from keras_caps.training import TrainingSettings
from keras_caps.training import model_building
from keras_caps.training import train
from keras_caps.training.epoch_clock import EpochClock
from keras_caps.training.execution_options import check_input_workers
from keras_caps.training.execution_options import check_steps_per_execution
from keras_caps.training.execution_options import check_time_budget
from keras_caps.training.execution_options import steps_in_call
from keras_caps.training.step_timer import SteadyStepTimer


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "4", None])
def test_bad_steps_per_execution_is_refused_before_anything(value,
                                                            tmp_path):
    with pytest.raises(ValueError, match=r"`steps_per_execution` "
                       r"\(--steps-per-execution\), expected a positive"):
        train("efficient_capsnet", "mnist", output_dir=str(tmp_path / "run"),
              data_dir=str(tmp_path / "none"), steps_per_execution=value)
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.parametrize("settings, backend, message", [
    (TrainingSettings(steps_per_epoch=6), "jax", "not a multiple of it"),
    (TrainingSettings(routing_temperature=4.0, temperature_decay=0.01),
     "jax", "annealed routing temperature"),
    (TrainingSettings(), "torch", "PyTorch trainer runs one step"),
])
def test_steps_per_execution_refused_where_it_cannot_apply(settings,
                                                           backend, message):
    with pytest.raises(ValueError, match=message):
        check_steps_per_execution(4, settings, backend=backend)
    assert check_steps_per_execution(1, settings, backend=backend) == 1
    assert check_steps_per_execution(
        2, TrainingSettings(steps_per_epoch=6), backend="jax") == 2


def test_cli_refuses_bad_steps_per_execution_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--steps-per-execution", "0"])
    assert ("argument --steps-per-execution: expected a positive integer"
            in capsys.readouterr().err)
    argv = ["train", "--output-dir", str(tmp_path / "run"), "--data-dir",
            str(tmp_path / "none"), "--steps-per-epoch", "6",
            "--steps-per-execution", "4"]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert "--steps-per-execution" in error
    assert not os.path.exists(tmp_path / "run")


def test_execution_flags_reach_train(tmp_path, monkeypatch, capsys):
    from keras_caps import training

    received = {}
    monkeypatch.setattr(training, "train",
                        lambda *args, **kwargs: received.update(kwargs) or {})
    argv = ["train", "--output-dir", str(tmp_path / "run")]
    assert cli.main(argv) == 0
    assert (received["steps_per_execution"],
            received["input_workers"]) == (1, None)
    assert cli.main(argv + ["--steps-per-execution", "64",
                            "--input-workers", "3"]) == 0
    assert (received["steps_per_execution"],
            received["input_workers"]) == (64, 3)


def test_input_workers_reach_the_numpy_pipeline(tmp_path, monkeypatch):
    # As without TensorFlow: the NumPy pipeline on every backend.
    monkeypatch.setattr(numpy_pipeline, "_tensorflow_import_error",
                        lambda: "ImportError: hidden by the test")
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40, seed=0),
                                 synthetic_digits(8, seed=1))
    settings = TrainingSettings(batch_size=4).resolve()
    assert check_input_workers(3, settings) == 3
    load, _ = model_building._built_in_loader(settings, data_dir, False,
                                              workers=3)
    for split in ("train", "validation", "test"):
        assert isinstance(load(split), keras.utils.PyDataset)
        assert load(split).workers == 3
    with pytest.raises(ValueError, match="with `steps_per_epoch`"):
        check_input_workers(2, TrainingSettings(steps_per_epoch=4))
    assert check_input_workers(1, TrainingSettings(steps_per_epoch=4)) == 1


def test_input_workers_refused_where_tf_data_reads(tmp_path):
    for value in (0, 1.5):
        with pytest.raises(ValueError, match=r"\(--input-workers\)"):
            check_input_workers(value, TrainingSettings())
    if keras.backend.backend() == "tensorflow":
        with pytest.raises(ValueError, match="read by tf.data here"):
            train("efficient_capsnet", "mnist",
                  output_dir=str(tmp_path / "run"), input_workers=2)
        assert not os.path.exists(tmp_path / "run")


def test_time_budget_is_checked():
    assert check_time_budget(None, "auto") is None
    assert check_time_budget(90, "mirrored") == 90.0
    for value in (0, -1, float("nan"), float("inf"), "8", True):
        with pytest.raises(ValueError, match="`time_budget`"):
            check_time_budget(value, "auto")
    with pytest.raises(ValueError, match="multi_worker"):
        check_time_budget(60, "multi_worker")


def test_steps_in_call_ends_at_the_epochs_last_step():
    assert steps_in_call(0, 3, {"steps": 6}) == 4
    assert steps_in_call(4, 7, {"steps": 6}) == 2
    assert steps_in_call(3, 3, {"steps": 6}) == 1
    assert steps_in_call(8, 11, {}) == 4  # Unknown length: as reported.


def test_step_timer_counts_the_steps_of_a_call():
    now = [0.0]
    timer = SteadyStepTimer(warmup_steps=4, clock=lambda: now[0])
    timer.set_params({"steps": 10})
    timer.on_train_begin()
    for begin, seconds in ((0, 8.0), (4, 2.0), (8, 1.0)):
        timer.on_train_batch_begin(begin)
        now[0] += seconds
        timer.on_train_batch_end(begin + 3)  # Keras: `begin + N - 1`.
    # The first call (4 steps) is the warm-up; then 4 steps in 2 s and
    # the epoch's last 2 steps in 1 s: 0.5 s a step.
    assert timer.record() == {"steady_ms_per_step": 500.0,
                              "steady_steps": 6}


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _epochs(clock, callback, seconds):
    for epoch, duration in enumerate(seconds):
        callback.on_epoch_begin(epoch)
        clock.now += duration
        callback.on_epoch_end(epoch, {})
        if callback.model.stop_training:
            return epoch + 1
    return len(seconds)


def test_epoch_clock_logs_speed_and_time_left(caplog):
    clock = _Clock()
    callback = EpochClock(epochs=4, batch_size=16, clock=clock)
    callback.set_model(types.SimpleNamespace(stop_training=False))
    callback.set_params({"steps": 100})
    with caplog.at_level(logging.INFO):
        assert _epochs(clock, callback, [4.0, 2.0, 2.0, 2.0]) == 4
    lines = [record.getMessage() for record in caplog.records]
    # 1,600 images in 2 s; two epochs left at the pace after the first
    # (which compiles): 2 s.
    assert lines[1] == ("Epoch 2/4: 1,600 training images in 2.0 s with "
                        "validation (800 images/s), elapsed 0:00:06, about "
                        "0:00:04 left.")
    assert callback.record() is None and not callback.ran_out
    assert callback.last_epoch == 4


def test_time_budget_stops_after_the_epoch_in_which_it_ran_out(caplog):
    clock = _Clock()
    callback = EpochClock(epochs=150, batch_size=16, budget=10.0,
                          clock=clock)
    callback.set_model(types.SimpleNamespace(stop_training=False))
    callback.set_params({"steps": 10})
    with caplog.at_level(logging.INFO):
        # 4 s per epoch: 8 s after two, 12 s after the third.
        assert _epochs(clock, callback, [4.0] * 150) == 3
    assert callback.record() == {"seconds": 10.0, "ran_out": True,
                                 "stopped_after_epoch": 3}
    assert caplog.records[-1].getMessage() == (
        "The time budget of 0:00:10 ran out: training stops after epoch 3 "
        "of 150.")
    # Running out in the last epoch is no stop: every epoch ran.
    clock = _Clock()
    last = EpochClock(epochs=2, batch_size=16, budget=1.0, clock=clock)
    last.set_model(types.SimpleNamespace(stop_training=False))
    last.set_params({"steps": 10})
    assert _epochs(clock, last, [0.5, 4.0]) == 2
    assert last.record()["ran_out"] is False
