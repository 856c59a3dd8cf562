"""Compiling capsule networks with the margin loss and a decoder loss."""

import keras

from keras_caps import losses
from keras_caps import metrics


def compile_capsule_model(model, preset, reconstruction, optimizer,
                          jit_compile):
    """Compiles a model whose `"length"` output holds the class scores.

    The margin loss on the lengths, plus `preset["reconstruction_weight"]`
    times the mean squared error of the `"reconstruction"` output when there
    is one; accuracy metrics on the lengths (per-digit and exact-match
    accuracy for presets with several objects per image). `"auto"` is Adam
    with the preset's learning rate. The optimizer state is created at once,
    so a freshly built model can be saved and reloaded before it trains.
    """
    if optimizer == "auto":
        optimizer = keras.optimizers.Adam(
            learning_rate=preset["learning_rate"])
    if preset["num_objects"] > 1:
        accuracy = [metrics.MultiDigitAccuracy(),
                    metrics.ExactMatchAccuracy()]
    else:
        accuracy = ["accuracy"]
    if reconstruction:
        model.compile(
            optimizer=optimizer,
            loss={"length": losses.MarginLoss(), "reconstruction": "mse"},
            loss_weights={"length": 1.0,
                          "reconstruction": preset["reconstruction_weight"]},
            metrics={"length": accuracy}, jit_compile=jit_compile)
    else:
        model.compile(optimizer=optimizer, loss=losses.MarginLoss(),
                      metrics=accuracy, jit_compile=jit_compile)
    model.optimizer.build(model.trainable_variables)
