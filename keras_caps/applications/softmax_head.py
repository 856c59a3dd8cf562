"""The head shared by the softmax CNNs: probabilities, cross-entropy."""

import keras

from keras_caps import model_roles as roles
from keras_caps.applications.compiling import compile_model
from keras_caps.applications.compiling import resolve_optimizer


def softmax_head_model(images, features, num_classes, preset, name, *,
                       compile, optimizer, jit_compile):
    """A CNN classifier from images and its last hidden features, compiled.

    A float32 softmax layer named `"probabilities"` on `features`
    `(batch, units)`; with `compile=True` the model is compiled with the
    categorical cross-entropy and accuracy, `"auto"` being Adam with the
    preset's learning rate (the capsule models' optimizer and schedule).
    Used by `CNNBaseline`, `PositionCNN` and `SabourBaselineCNN`.
    """
    probabilities = keras.layers.Dense(
        num_classes, activation="softmax", dtype="float32",
        name=roles.PROBABILITIES)(features)  # (batch, num_classes)
    model = keras.Model(images, probabilities, name=name)
    if compile:
        optimizer = resolve_optimizer(optimizer, lambda: keras.optimizers.Adam(
            learning_rate=preset["learning_rate"]))
        compile_model(model, optimizer,
                      loss=keras.losses.CategoricalCrossentropy(),
                      metrics=["accuracy"], jit_compile=jit_compile)
    return model
