"""The head shared by capsule networks: lengths, masks and the decoder."""

import keras

from keras_caps import layers


def capsule_model(images, class_capsules, decoder, num_objects, name):
    """The model from images and class capsules to lengths and decoding.

    The class scores are the capsule lengths (a float32 `"length"` layer).
    With a `decoder`, the model also takes one-hot `"label"`s (one per
    object) and returns `{"length": ..., "reconstruction": ...}`, the
    decoder reading the true class capsules while training and the longest
    ones otherwise; with `decoder=None` it maps images to the lengths.
    """
    lengths = layers.Length(dtype="float32", name="length")(class_capsules)
    if decoder is None:
        return keras.Model(images, lengths, name=name)
    num_classes = class_capsules.shape[1]
    label_shape = ((num_classes,) if num_objects == 1 else
                   (num_objects, num_classes))
    labels = keras.Input(label_shape, name="label")
    masked = layers.Mask(num_masks=None if num_objects == 1 else num_objects,
                         name="mask")([class_capsules, labels])
    return keras.Model(
        {"image": images, "label": labels},
        {"length": lengths, "reconstruction": decoder(masked)}, name=name)
