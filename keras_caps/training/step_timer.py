"""Steady-state training speed and the process's peak memory.

`SteadyStepTimer` times training batches only: from each batch's start to
its end, so validation, checkpoints and backups (run between batches or
at epoch ends) are never inside a timed interval; the first
`warmup_steps` batches of each `fit` call, where the step function is
traced and compiled, are left out. The result is the median over the
remaining batches of this process, so a resumed run reports the speed of
the steps it ran itself. With `steps_per_execution`, a timed interval is
one call of several steps, counted as its time per step.

`peak_memory_mb` is the process's peak resident memory from
`resource.getrusage`: it includes the framework's runtime, the data
pipeline and everything else the process holds, not the model alone.
"""

import statistics
import sys
import time

import keras

from keras_caps.training.execution_options import steps_in_call

try:
    import resource
except ImportError:  # Not on Windows.
    resource = None

DEFAULT_WARMUP_STEPS = 5


class SteadyStepTimer(keras.callbacks.Callback):
    """Times each training batch; the median without the warm-up steps.

    Args:
        warmup_steps: int. Batches left out at the start of each `fit`
            call (tracing and compilation). Defaults to `5`.
        clock: Callable returning seconds (`time.perf_counter`; a fake
            clock in tests).

    Example:

    >>> timer = SteadyStepTimer(warmup_steps=0)
    >>> timer.record()
    {'steady_ms_per_step': None, 'steady_steps': 0}
    """

    def __init__(self, warmup_steps=DEFAULT_WARMUP_STEPS,
                 clock=time.perf_counter):
        super().__init__()
        if (isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int)
                or warmup_steps < 0):
            raise ValueError(
                "Received an invalid value for `warmup_steps`, expected a "
                "non-negative int. Received: "
                f"warmup_steps={warmup_steps!r}")
        self.warmup_steps = warmup_steps
        self.clock = clock
        self.durations = []  # Seconds per step of each timed call.
        self.steady_steps = 0  # The steps those calls ran.
        self._steps_this_fit = 0
        self._start = None

    def on_train_begin(self, logs=None):
        self._steps_this_fit = 0

    def on_train_batch_begin(self, batch, logs=None):
        self._start = self.clock()
        self._begin = batch

    def on_train_batch_end(self, batch, logs=None):
        end = self.clock()
        steps = steps_in_call(getattr(self, "_begin", batch), batch,
                              self.params)
        warm = self._steps_this_fit >= self.warmup_steps
        self._steps_this_fit += steps
        if self._start is not None and warm:
            self.durations.append((end - self._start) / steps)
            self.steady_steps += steps
        self._start = None

    def record(self):
        """`{"steady_ms_per_step": median ms or None, "steady_steps": n}`."""
        if not self.durations:
            return {"steady_ms_per_step": None, "steady_steps": 0}
        return {"steady_ms_per_step": round(
                    1000.0 * statistics.median(self.durations), 3),
                "steady_steps": self.steady_steps}


def peak_memory_mb():
    """The process's peak resident memory in MiB, `None` where unknown.

    Example:

    >>> peak_memory_mb() > 0
    True
    """
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Kilobytes on Linux, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return round(peak * scale / 2**20, 1)
