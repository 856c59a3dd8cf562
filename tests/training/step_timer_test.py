"""Steady-state ms/step from a fake clock, and the peak memory.

The fake clock advances only when something calls it or when a simulated
slow part (validation, a checkpoint after each batch, an epoch's end)
advances it, so the expected durations are worked out by hand.
"""

import sys

import keras
import numpy as np
import pytest

from keras_caps.training.step_timer import SteadyStepTimer
from keras_caps.training.step_timer import peak_memory_mb


class _FakeClock:
    def __init__(self):
        self.now = 0.0
        self.step = 0.0

    def __call__(self):
        # Each batch's end reads the clock one training step after its
        # start: the step's duration.
        self.now += self.step
        return self.now


class _SlowParts(keras.callbacks.Callback):
    """Advances the clock outside training batches: a checkpoint after
    each batch, validation batches and the epoch's end."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def on_train_batch_end(self, batch, logs=None):
        self.clock.now += 50.0  # a backup after the timer's batch end

    def on_test_batch_end(self, batch, logs=None):
        self.clock.now += 100.0

    def on_epoch_end(self, epoch, logs=None):
        self.clock.now += 1000.0


def _events(timer, clock, durations):
    """Drives `timer` as `fit` would over batches of these durations."""
    timer.on_train_begin()
    for batch, seconds in enumerate(durations):
        clock.step = 0.0
        timer.on_train_batch_begin(batch)
        clock.step = seconds
        timer.on_train_batch_end(batch)
        clock.step = 0.0
        clock.now += 7.0  # between batches: never timed


def test_median_without_warmup_steps():
    clock = _FakeClock()
    timer = SteadyStepTimer(warmup_steps=2, clock=clock)
    # The first two (tracing) are left out; the median of 0.010, 0.030,
    # 0.020, 0.500 is 0.025 s.
    _events(timer, clock, [9.0, 3.0, 0.010, 0.030, 0.020, 0.500])
    assert timer.record() == {"steady_ms_per_step": 25.0,
                              "steady_steps": 4}


def test_each_fit_call_skips_its_warmup():
    clock = _FakeClock()
    timer = SteadyStepTimer(warmup_steps=1, clock=clock)
    _events(timer, clock, [5.0, 0.010, 0.010])
    _events(timer, clock, [6.0, 0.040])  # a second fit: traced again
    assert timer.record() == {"steady_ms_per_step": 10.0,
                              "steady_steps": 3}


def test_too_few_steps_is_unknown():
    clock = _FakeClock()
    timer = SteadyStepTimer(warmup_steps=5, clock=clock)
    _events(timer, clock, [1.0, 1.0])  # e.g. a resumed run's last 2 steps
    assert timer.record() == {"steady_ms_per_step": None, "steady_steps": 0}


def test_fit_times_training_batches_only():
    clock = _FakeClock()
    clock.step = 0.0
    timer = SteadyStepTimer(warmup_steps=1, clock=clock)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 2), "float32")

    class _Step(keras.callbacks.Callback):
        # Before the timer's batch end, each batch "takes" 0.25 s.
        def on_train_batch_begin(self, batch, logs=None):
            clock.now += 0.25

    # 2 epochs of 4 batches, each followed by validation and a checkpoint:
    # every timed batch took 0.25 s, whatever ran between them.
    model.fit(x, y, batch_size=2, epochs=2, validation_data=(x, y),
              callbacks=[timer, _Step(), _SlowParts(clock)], verbose=0)
    assert timer.record() == {"steady_ms_per_step": 250.0,
                              "steady_steps": 7}


def test_bad_warmup_is_refused():
    with pytest.raises(ValueError, match="`warmup_steps`.*Received: "
                       "warmup_steps=-1"):
        SteadyStepTimer(warmup_steps=-1)


@pytest.mark.single_backend
@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc/self/status")
def test_peak_memory_matches_the_kernels_high_water_mark():
    def high_water_mib():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
        raise AssertionError("no VmHWM")

    before = high_water_mib()
    peak = peak_memory_mb()
    after = high_water_mib()
    assert before - 0.1 <= peak <= after + 0.1
