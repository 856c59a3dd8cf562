"""The `--strategy` names on the JAX and PyTorch backends.

TensorFlow's strategies (`keras_caps.training.strategy`) have one
counterpart in Keras 3's own distribution API: data parallelism on the
local devices, `keras.distribution.DataParallel`, which Keras implements
on JAX. So on JAX `"mirrored"` is `DataParallel` over every local
device (several GPUs, or the CPU's devices under
`XLA_FLAGS=--xla_force_host_platform_device_count=N`) and `"auto"` is
`DataParallel` when there are several devices, else one device. On
PyTorch, Keras has no distribution: `"auto"` and `"one_device"` train on
one device and `"mirrored"` is refused. The strategies only TensorFlow
has (`"multi_worker"`, `"tpu"`) are refused on both, naming what to use
instead. None of this imports TensorFlow.
"""

import contextlib
import logging

import keras

# What to use instead of a strategy this backend does not have.
_ONLY_TENSORFLOW = {
    "multi_worker": "it is TensorFlow's MultiWorkerMirroredStrategy "
    "(TF_CONFIG clusters): run with KERAS_BACKEND=tensorflow, or train on "
    "one machine's devices with --strategy mirrored on JAX",
    "tpu": "it is TensorFlow's TPUStrategy: run with "
    "KERAS_BACKEND=tensorflow (on JAX, a TPU host's chips are local "
    "devices: --strategy auto or mirrored uses them all)",
}


class BackendDistribution:
    """What the training recipe needs of a strategy, on JAX or PyTorch.

    Wraps a `keras.distribution.Distribution` (or none: one device) with
    the parts of `tf.distribute.Strategy` the recipe reads.

    Args:
        distribution: `keras.distribution.Distribution` or `None`.
    """

    cluster_resolver = None  # One process: it is the chief.

    def __init__(self, distribution=None):
        self.distribution = distribution

    @property
    def name(self):
        """`"DataParallel"`, or `"OneDevice"` without a distribution."""
        if self.distribution is None:
            return "OneDevice"
        return type(self.distribution).__name__

    @property
    def num_replicas_in_sync(self):
        """The number of devices each global batch is split across."""
        if self.distribution is None:
            return 1
        return int(self.distribution.device_mesh.devices.size)

    def scope(self):
        """The distribution's scope (`keras.distribution` is set inside
        it), or a scope that does nothing."""
        if self.distribution is None:
            return contextlib.nullcontext()
        return self.distribution.scope()


def backend_distribution(name):
    """The `BackendDistribution` of the strategy `name` on this backend.

    Args:
        name: str. One of `keras_caps.training.STRATEGIES`.

    Returns:
        A `BackendDistribution`.

    Raises:
        ValueError: for a strategy this backend does not have, naming
            what to use instead.
    """
    check_strategy_supported(name)
    backend = keras.backend.backend()
    if backend != "jax" or name == "one_device":
        logging.info("Training on one device (%s backend).", backend)
        return BackendDistribution()
    devices = keras.distribution.list_devices()
    if name == "auto" and len(devices) < 2:
        logging.info("Training on one device: %s", devices[0])
        return BackendDistribution()
    logging.info("Training with keras.distribution.DataParallel on %d "
                 "devices: %s", len(devices), ", ".join(devices))
    return BackendDistribution(keras.distribution.DataParallel(
        devices=devices))


def check_strategy_supported(name, backend=None):
    """Raises a one-line `ValueError` when `backend` (default: Keras')
    has no strategy `name`, before anything is read or written.

    Args:
        name: str. A `--strategy` name.
        backend: str or `None`. The Keras backend; `None`: the current.

    Example:

    ```python
    check_strategy_supported("mirrored", "jax")  # DataParallel: fine.
    check_strategy_supported("tpu", "torch")  # Raises ValueError.
    ```
    """
    backend = backend or keras.backend.backend()
    if backend == "tensorflow":
        return
    if name in _ONLY_TENSORFLOW:
        raise ValueError(
            f"The {name!r} strategy is not available on the {backend!r} "
            f"backend: {_ONLY_TENSORFLOW[name]}. Received: "
            f"strategy={name!r}, KERAS_BACKEND={backend!r}")
    if name == "mirrored" and backend != "jax":
        raise ValueError(
            f"The 'mirrored' strategy is not available on the {backend!r} "
            "backend: Keras 3 has no data-parallel distribution for it. "
            "Train on one device (--strategy auto), or on several with "
            "KERAS_BACKEND=jax (keras.distribution.DataParallel) or "
            "KERAS_BACKEND=tensorflow (MirroredStrategy). Received: "
            f"strategy={name!r}, KERAS_BACKEND={backend!r}")


def check_batch_divides(distribution, batch_size):
    """Raises when the global batch cannot be split evenly across the
    devices of `distribution` (`DataParallel` gives each an equal share).

    Args:
        distribution: a `BackendDistribution` or a `tf.distribute`
            strategy (which splits uneven batches itself: not checked).
        batch_size: int. The global batch size.
    """
    if not isinstance(distribution, BackendDistribution):
        return
    devices = distribution.num_replicas_in_sync
    if batch_size % devices:
        raise ValueError(
            f"Received an invalid value for `batch_size`: "
            f"keras.distribution.DataParallel splits each global batch "
            f"evenly across its {devices} devices, expected a multiple of "
            f"{devices}. Received: batch_size={batch_size}")
