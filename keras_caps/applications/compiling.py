"""How the application builders resolve their optimizer and compile."""

import importlib
import warnings

import keras


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


JIT_COMPILE_DOC = (
    "bool or `\"auto\"`, passed to `compile`. Defaults to `\"auto\"`, "
    "Keras' choice: XLA on JAX (where an uncompiled step runs op by op) "
    "and on TensorFlow with a GPU or TPU and no distribution strategy; no "
    "XLA on CPU-only TensorFlow, where it slows the training steps of "
    "these models down (see the README's speed section).")


def builder_docstring(builder):
    """Fills the argument docs every builder shares into its docstring."""
    builder.__doc__ = builder.__doc__.replace("{jit_compile}",
                                              JIT_COMPILE_DOC)
    return builder


def compile_logits_classifier(model, optimizer, default_optimizer,
                              jit_compile):
    """Compiles a model with class logits: cross-entropy and accuracy.

    `optimizer="auto"` becomes `default_optimizer()`; the loss is
    categorical cross-entropy from logits on one-hot labels.
    """
    optimizer = resolve_optimizer(optimizer, default_optimizer)
    compile_model(
        model, optimizer,
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"], jit_compile=jit_compile)


def compile_model(model, optimizer, **compile_kwargs):
    """`model.compile(...)`, then creates the optimizer state at once.

    With the state created, a freshly built model can be saved and reloaded
    before it has trained.
    """
    model.compile(optimizer=optimizer, **compile_kwargs)
    model.optimizer.build(model.trainable_variables)
