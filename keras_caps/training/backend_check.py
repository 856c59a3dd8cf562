"""`check_backend`: the backends the training recipe trains on
(TensorFlow, JAX and PyTorch), refused before anything is written."""

import keras


def check_backend(command="`keras-caps train` (`keras_caps.training.train`)"):
    """Refuses, before anything is written, a backend the recipe cannot
    train on: it trains on TensorFlow, JAX and PyTorch.

    On JAX and PyTorch the recipe is the same (holdout selection, best
    checkpoint, resume, run records, CSV logs, mixed precision), with
    these differences: the strategies are `keras.distribution`'s (see
    `keras_caps.training.backend_distribution`); the TensorBoard logs
    need TensorFlow installed (without it they are skipped, with a
    notice); and the export stage writes what the backend can export, or
    is skipped with a notice saying how to export `model.keras` later
    (see `keras_caps.training.run_artifacts`).

    Args:
        command: str. What refuses, for the message.

    Raises:
        ValueError: when Keras runs on another backend.

    Example:

    ```python
    check_backend()  # Before writing a run's or a comparison's files.
    ```
    """
    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax", "torch"):
        raise ValueError(
            f"{command} trains on the TensorFlow, JAX or PyTorch backend; "
            f"the {backend!r} backend cannot train, so nothing was trained "
            "or written. Run it with KERAS_BACKEND=jax, torch or "
            f"tensorflow. Received: KERAS_BACKEND={backend!r}")
