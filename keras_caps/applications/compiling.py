"""How the application builders compile their models."""

import keras

from keras_caps import losses
from keras_caps import metrics


def resolve_optimizer(optimizer, default):
    """The optimizer to compile with.

    `"auto"` becomes `default()`. Under the `mixed_float16` policy the
    optimizer is wrapped in a `LossScaleOptimizer` here rather than by
    `compile`, so the compile config records the wrapper and a saved model
    reloads with all its optimizer state under any global policy.
    """
    if optimizer == "auto":
        optimizer = default()
    if (keras.config.dtype_policy().name == "mixed_float16"
            and not isinstance(optimizer,
                               keras.optimizers.LossScaleOptimizer)):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


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
