"""The head shared by capsule networks: lengths, masks, decoder, compile."""

import keras

from keras_caps import layers
from keras_caps import losses
from keras_caps import metrics
from keras_caps import model_roles as roles
from keras_caps.applications.compiling import compile_model
from keras_caps.applications.compiling import resolve_optimizer


def capsule_head_model(images, class_capsules, decoder, preset, name, *,
                       compile, optimizer, jit_compile):
    """The capsule network from images and class capsules, compiled.

    The class scores are the capsule lengths (a float32 `"length"` layer).
    With a `decoder`, the model also takes one-hot `"label"`s (one per
    object, `preset["num_objects"]`) and returns
    `{"length": ..., "reconstruction": ...}`, the decoder reading the true
    class capsules while training and the longest ones otherwise; with
    `decoder=None` it maps images to the lengths. With `compile=True` it is
    compiled with the margin loss (plus the weighted reconstruction error)
    and accuracy metrics; see `_compile`.
    """
    num_objects = preset["num_objects"]
    lengths = layers.Length(dtype="float32", name=roles.LENGTH)(
        class_capsules)  # (batch, classes)
    if decoder is None:
        model = keras.Model(images, lengths, name=name)
    else:
        num_classes = class_capsules.shape[1]
        label_shape = ((num_classes,) if num_objects == 1 else
                       (num_objects, num_classes))
        labels = keras.Input(label_shape, name=roles.LABEL)
        masked = layers.Mask(
            num_masks=None if num_objects == 1 else num_objects,
            name=roles.MASK)([class_capsules, labels])
        model = keras.Model(
            {roles.IMAGE: images, roles.LABEL: labels},
            {roles.LENGTH: lengths, roles.RECONSTRUCTION: decoder(masked)},
            name=name)
    if compile:
        _compile(model, preset, decoder is not None, optimizer, jit_compile)
    return model


def _compile(model, preset, reconstruction, optimizer, jit_compile):
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
            loss={roles.LENGTH: losses.MarginLoss(),
                  roles.RECONSTRUCTION: "mse"},
            loss_weights={
                roles.LENGTH: 1.0,
                roles.RECONSTRUCTION: preset["reconstruction_weight"]},
            metrics={roles.LENGTH: accuracy}, jit_compile=jit_compile)
    else:
        compile_model(model, optimizer, loss=losses.MarginLoss(),
                      metrics=accuracy, jit_compile=jit_compile)
