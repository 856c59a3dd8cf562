"""How the application builders compile their models."""

import importlib
import warnings

import keras

from keras_caps import losses
from keras_caps import metrics


def resolve_optimizer(optimizer, default):
    """The optimizer to compile with.

    `"auto"` becomes `default()`. Under the `mixed_float16` policy the
    optimizer is wrapped in a `LossScaleOptimizer` here rather than by
    `compile`, so the compile config records the wrapper and a saved model
    reloads with all its optimizer state under any global policy; and on a
    machine without a GPU a `UserWarning` says that float16 training will
    be slow there and what to use instead.
    """
    if optimizer == "auto":
        optimizer = default()
    if keras.config.dtype_policy().name == "mixed_float16":
        _warn_if_no_accelerator()
        if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


_FLOAT16_ON_CPU_WARNING = (
    "Training under the mixed_float16 policy on a machine without a GPU is "
    "slow: CPUs compute the gradients of float16 convolutions several times "
    "slower than float32 ones, up to 100x on some Intel Xeons (see the "
    "keras_caps README, 'Mixed precision'). Train in float32, or in "
    "mixed_bfloat16 on CPUs with AVX-512 (`--precision mixed_bfloat16` for "
    "`keras-caps train`); float16 pays off on NVIDIA GPUs.")


def _warn_if_no_accelerator():
    if not _accelerator_available():
        warnings.warn(_FLOAT16_ON_CPU_WARNING, UserWarning, stacklevel=3)


def _accelerator_available():
    """Whether the Keras backend sees a GPU or TPU (or an Apple GPU)."""
    backend = keras.backend.backend()
    if backend == "torch":
        torch = importlib.import_module("torch")
        return bool(torch.cuda.is_available()
                    or torch.backends.mps.is_available())
    if backend == "numpy":
        return False
    return any(not device.lower().startswith("cpu")
               for device in keras.distribution.list_devices())


def compile_model(model, optimizer, **compile_kwargs):
    """`model.compile(...)`, then creates the optimizer state at once.

    With the state created, a freshly built model can be saved and reloaded
    before it has trained.
    """
    model.compile(optimizer=optimizer, **compile_kwargs)
    model.optimizer.build(model.trainable_variables)


def compile_capsule_model(model, preset, reconstruction, optimizer,
                          jit_compile):
    """Compiles a model whose `"length"` output holds the class scores.

    The margin loss on the lengths, plus `preset["reconstruction_weight"]`
    times the mean squared error of the `"reconstruction"` output when there
    is one; accuracy metrics on the lengths (per-digit and exact-match
    accuracy for presets with several objects per image). `"auto"` is Adam
    with the preset's learning rate.
    """
    optimizer = resolve_optimizer(optimizer, lambda: keras.optimizers.Adam(
        learning_rate=preset["learning_rate"]))
    if preset["num_objects"] > 1:
        accuracy = [metrics.MultiDigitAccuracy(),
                    metrics.ExactMatchAccuracy()]
    else:
        accuracy = ["accuracy"]
    if reconstruction:
        compile_model(
            model, optimizer,
            loss={"length": losses.MarginLoss(), "reconstruction": "mse"},
            loss_weights={"length": 1.0,
                          "reconstruction": preset["reconstruction_weight"]},
            metrics={"length": accuracy}, jit_compile=jit_compile)
    else:
        compile_model(model, optimizer, loss=losses.MarginLoss(),
                      metrics=accuracy, jit_compile=jit_compile)
