"""The head shared by the softmax CNNs: probabilities, cross-entropy."""

import keras

from keras_caps import metrics
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

    For presets with several objects per image (`preset["num_objects"]`
    above 1, MultiMNIST) the layer is a sigmoid per class instead, trained
    with the binary cross-entropy on the multi-hot targets: each class is
    present or not, independently, so two classes can both score near 1
    (a softmax would have them share one unit of probability), and the
    model reads its digits from its highest scores, as the capsule models
    read theirs from the longest capsules; per-digit and exact-match
    accuracy as metrics.
    """
    multi_object = preset["num_objects"] > 1
    probabilities = keras.layers.Dense(
        num_classes, activation="sigmoid" if multi_object else "softmax",
        dtype="float32", name=roles.PROBABILITIES)(
            features)  # (batch, num_classes)
    model = keras.Model(images, probabilities, name=name)
    if compile:
        optimizer = resolve_optimizer(optimizer, lambda: keras.optimizers.Adam(
            learning_rate=preset["learning_rate"]))
        if multi_object:
            compile_model(model, optimizer,
                          loss=keras.losses.BinaryCrossentropy(),
                          metrics=[metrics.MultiDigitAccuracy(
                              num_digits=preset["num_objects"]),
                              metrics.ExactMatchAccuracy(
                                  num_digits=preset["num_objects"])],
                          jit_compile=jit_compile)
        else:
            compile_model(model, optimizer,
                          loss=keras.losses.CategoricalCrossentropy(),
                          metrics=["accuracy"], jit_compile=jit_compile)
    return model
