"""How a run is executed, beside its settings: steps per host dispatch,
input workers and a time budget, checked before anything is written.

None of them changes what a step computes (the same batches in the same
order, the same learning rate per epoch), so they are not
`TrainingSettings`: a run resumed with other values continues the same
training. They are recorded in `metrics.json` with what ran.

`steps_per_execution` (`compile`'s) runs N optimizer steps per call of the
trainer's step function, and the callbacks see one batch call per N steps
(`on_train_batch_end(end_step)`): what is done per step on the host
cannot be done then. Keras' epoch iterator also reports the last call of
an epoch as a full one (`end_step` past the epoch's last step) and, on
data without end (a run with `steps_per_epoch`, whose batches repeat),
runs it in full: `steps_in_call` gives the steps a call really ran, and a
`steps_per_epoch` that N does not divide is refused.
"""

import numbers

import keras

from keras_caps.datasets.numpy_pipeline import NUMPY_DATASETS
from keras_caps.datasets.numpy_pipeline import resolve_input_pipeline


def _check_count(name, flag, value, expected="a positive integer"):
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or value < 1):
        raise ValueError(
            f"Received an invalid value for `{name}` ({flag}), expected "
            f"{expected}. Received: {name}={value!r}")
    return int(value)


def check_steps_per_execution(value, settings, backend=None):
    """`steps_per_execution` as an int, or a one-line `ValueError`.

    Refused: anything but a positive integer; more than 1 on PyTorch
    (whose Keras trainer runs one step per call), with an annealed
    routing temperature (set on the host before each step), or with a
    `steps_per_epoch` it does not divide (Keras would run whole calls past
    the epoch's end on repeated data).

    Args:
        value: The requested steps per execution.
        settings: The run's `TrainingSettings`.
        backend: str or `None` (the current Keras backend).

    Example:

    >>> from keras_caps.training import TrainingSettings
    >>> check_steps_per_execution(4, TrainingSettings(steps_per_epoch=8),
    ...                           backend="jax")
    4
    """
    value = _check_count("steps_per_execution", "--steps-per-execution",
                         value)
    if value == 1:
        return value
    backend = backend or keras.backend.backend()
    why = None
    if backend == "torch":
        why = ("Keras' PyTorch trainer runs one step per call; use "
               "steps_per_execution=1 there, or JAX or TensorFlow")
    elif settings.temperature_schedule() is not None:
        why = ("the annealed routing temperature is set before each step "
               "and a callback sees one call per N steps; anneal with "
               "steps_per_execution=1")
    elif settings.steps_per_epoch and settings.steps_per_epoch % value:
        why = (f"`steps_per_epoch` ({settings.steps_per_epoch}) is not a "
               "multiple of it: Keras would run the epoch's last call in "
               "full, past the epoch's end; choose a divisor of it")
    if why is not None:
        raise ValueError(
            f"`steps_per_execution` (--steps-per-execution) cannot be "
            f"{value} here: {why}. Received: steps_per_execution={value}")
    return value


def check_input_workers(value, settings):
    """`input_workers` as an int (or `None`), or a one-line `ValueError`.

    The NumPy input pipeline's threads (`keras.utils.PyDataset`'s
    `workers`), for the built-in datasets it covers; `tf.data` sets its
    own parallelism, so they are refused where it is the pipeline. More
    than one is refused with `steps_per_epoch`: the batches then repeat
    without end, and the workers would make batches of the next epoch
    before Keras' epoch end reshuffles, so which batches a run sees would
    depend on the threads' timing.

    Example:

    >>> from keras_caps.training import TrainingSettings
    >>> check_input_workers(3, TrainingSettings(dataset="mnist"))
    3
    """
    if value is None:
        return None
    value = _check_count("input_workers", "--input-workers", value)
    if settings.is_user_data() or resolve_input_pipeline(
            "auto", settings.dataset) != "numpy":
        raise ValueError(
            "`input_workers` (--input-workers) are the threads of the NumPy "
            f"input pipeline ({', '.join(NUMPY_DATASETS)} when the Keras "
            "backend is not TensorFlow or TensorFlow is not installed); "
            f"{settings.dataset!r} is read by tf.data here, which sets its "
            "own parallelism. Drop the option. Received: "
            f"input_workers={value}, dataset={settings.dataset!r}, "
            f"KERAS_BACKEND={keras.backend.backend()!r}")
    if value > 1 and settings.steps_per_epoch:
        raise ValueError(
            "More than one of `input_workers` (--input-workers) with "
            "`steps_per_epoch` (--steps-per-epoch): the batches then repeat "
            "without end and the workers would make some before the epoch's "
            "reshuffle, so the batches would depend on their timing. Train "
            "full epochs, or use one worker. Received: "
            f"input_workers={value}, "
            f"steps_per_epoch={settings.steps_per_epoch}")
    return value


def check_time_budget(value, strategy):
    """`time_budget` in seconds as a float (or `None`), or a one-line
    `ValueError`: a positive, finite number; not with the
    `multi_worker` strategy (each worker's clock would stop it after
    another epoch).

    Example:

    >>> check_time_budget(480, "auto")
    480.0
    """
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 < value < float("inf")):
        raise ValueError(
            "Received an invalid value for `time_budget`, expected a "
            "positive number of seconds. Received: "
            f"time_budget={value!r}")
    if strategy == "multi_worker":
        raise ValueError(
            "`time_budget` stops training on each process's own clock, "
            "and the workers of the multi_worker strategy would stop after "
            "different epochs. Drop it, or train on one machine. "
            f"Received: time_budget={value!r}, strategy='multi_worker'")
    return float(value)


def steps_in_call(begin, end, params):
    """The steps a call of the training function ran, from the
    `on_train_batch_begin(begin)` and `on_train_batch_end(end)` of the
    call: `end - begin + 1`, but the last call of an epoch of known
    length (`params["steps"]`) ends at its last step.

    Example:

    >>> steps_in_call(4, 7, {"steps": 6})
    2
    """
    steps = (params or {}).get("steps")
    if steps:
        end = min(end, steps - 1)
    return max(end - begin + 1, 1)
