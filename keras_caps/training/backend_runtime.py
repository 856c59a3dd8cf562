"""What the training recipe does differently on each Keras backend.

Determinism, the devices a record names, the framework versions it
records, the logs it writes (TensorBoard's writer is TensorFlow's) and the
scope training runs in. None of this imports TensorFlow unless the
backend is TensorFlow or TensorFlow is already imported: on JAX or
PyTorch `keras-caps train` runs where TensorFlow is not installed.
"""

import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import sys

import keras

# The framework each backend computes with, by its distribution name.
_FRAMEWORKS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}


def tensorflow_installed():
    """Whether `import tensorflow` can succeed, without importing it.

    `False` also where an import hook refuses it (as the tests that prove
    a path needs no TensorFlow do).
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"] is not None
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def backend_versions():
    """`{"keras": ..., <backend's framework>: ...}`, and TensorFlow's
    version when TensorFlow is imported (its input path ran)."""
    versions = {"keras": keras.__version__}
    names = [_FRAMEWORKS.get(keras.backend.backend())]
    if sys.modules.get("tensorflow") is not None:
        names.append("tensorflow")
    for name in filter(None, names):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = getattr(sys.modules.get(name), "__version__",
                                     None)
    return versions


def enable_determinism():
    """Deterministic kernels on the backend (`--deterministic`).

    TensorFlow: op determinism. PyTorch: deterministic algorithms (with
    the cuBLAS workspace setting they need on GPUs). JAX: XLA's
    deterministic GPU ops, which must be set before JAX starts (CPU
    kernels are deterministic already).
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    elif backend == "torch":
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    elif backend == "jax":
        flag = "--xla_gpu_deterministic_ops=true"
        flags = os.environ.get("XLA_FLAGS", "")
        if flag not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
            if "jax" in sys.modules and _jax_started():
                logging.warning(
                    "--deterministic: JAX started before XLA_FLAGS could "
                    "ask for deterministic GPU ops; set XLA_FLAGS=%s "
                    "before starting Python for deterministic GPU runs "
                    "(CPU runs are deterministic).", flag)


def _jax_started():
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge._backends)
    except (ImportError, AttributeError):
        return True


def describe_devices():
    """A short description of the devices the backend trains on:
    `"<n> GPU(s): <names>"`, else `None` (the CPU)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        names = [tf.config.experimental.get_device_details(gpu).get(
            "device_name", gpu.name) for gpu in gpus]
    elif backend == "jax":
        import jax

        names = [getattr(device, "device_kind", str(device))
                 for device in jax.devices() if device.platform != "cpu"]
    elif backend == "torch":
        import torch

        names = [torch.cuda.get_device_name(index)
                 for index in range(torch.cuda.device_count())]
    else:
        names = []
    if not names:
        return None
    return f"{len(names)} GPU(s): {', '.join(names)}"


def logs_callbacks(logs_dir):
    """The TensorBoard callback writing to `logs_dir`, in a list; empty,
    with a one-line notice, where TensorFlow (whose summary writer
    TensorBoard's logs need) is not installed. `history.csv` holds the
    same numbers."""
    if keras.backend.backend() != "tensorflow" and not tensorflow_installed():
        logging.warning(
            "TensorBoard logs skipped: their writer needs TensorFlow, "
            "which is not installed (`pip install tensorflow-cpu` to have "
            "them); history.csv has the same numbers.")
        return []
    return [keras.callbacks.TensorBoard(logs_dir)]


def training_scope(distribution):
    """The scope a run trains in: a `keras.distribution` distribution
    must be set while `fit` runs (it shards each batch), TensorFlow's
    strategies need only the model built in theirs (see
    `keras_caps.training.model_building`)."""
    if hasattr(distribution, "distribution"):  # A BackendDistribution.
        return distribution.scope()
    return contextlib.nullcontext()
