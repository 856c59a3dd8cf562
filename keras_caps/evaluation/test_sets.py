"""The test images a robustness evaluation scores, and how it scores them.

Shared by `keras_caps.evaluation.robustness` (one object an image) and
`keras_caps.evaluation.multi_digit_robustness` (the digits of a
multi-digit image): the test split as arrays (`load_test_arrays`), each
corruption's test set drawn from a seed (`corrupted_test_sets`), the key of
its results (`column_key`), the image-to-scores part of a model
(`classifier`) and the per-class mean accuracy (`macro_accuracy`).
"""

import numpy as np

from keras_caps import datasets
from keras_caps import model_roles as roles
from keras_caps.evaluation import corruptions as corruptions_lib
from keras_caps.inference import inference_model
from keras_caps.training.data_batches import numpy_batches

# Seed offsets, so each corruption draws its own random numbers.
_SEED_OFFSETS = {"noise": 1, "pixels": 2, "occlusion": 3, "affine": 4,
                 "translated": 5}
# The digit's frame moves within the canvas margin: (40 - 28) / 2.
_CANVAS_MAX_SHIFT = 6


def load_test_arrays(dataset, *, data_dir=None, seed=42, dataset_options=None,
                     download=True, class_ids=True):
    """The test split of `dataset` as NumPy arrays.

    Returns:
        `(images, labels)`: float32 `(n, height, width, channels)` in raw
        pixels, as the loaders yield them, and int64 class ids `(n,)`
        (with `class_ids=False`: the loader's float32 `(n, classes)`
        labels, e.g. the two ones of a MultiMNIST pair).
    """
    test = datasets.load(dataset, "test", batch_size=1000,
                         data_dir=data_dir, seed=seed, reconstruction=False,
                         download=download, **(dataset_options or {}))
    images, labels = [], []
    for batch_images, batch_labels in numpy_batches(test):
        images.append(batch_images)
        labels.append(batch_labels.argmax(axis=-1) if class_ids
                      else batch_labels)
    return np.concatenate(images), np.concatenate(labels)


def classifier(model):
    """The image-to-scores part of a model (drops labels and decoder)."""
    if any(layer.name in (roles.LABEL, roles.MASK) for layer in model.layers):
        return inference_model(model)
    return model


def corrupted_test_sets(dataset, images, labels, corruptions, seed, *,
                        data_dir=None, download=True):
    """Yields `(kind, severity, images, labels)` for each corruption.

    `kind` is a key of `CORRUPTIONS` or `"translated"`; `severity` is
    `None` for the affine set (read from affNIST's files with
    `"affnist_dir"`, else generated from the MNIST test digits) and the
    translated one (the clean `images`, moved).
    """
    for kind, function in (("noise", corruptions_lib.gaussian_noise),
                           ("pixels", corruptions_lib.pixel_corruption),
                           ("occlusion", corruptions_lib.occlusion)):
        for index, severity in enumerate(corruptions[kind]):
            yield kind, severity, function(
                images, severity,
                seed + 1000 * _SEED_OFFSETS[kind] + index), labels
    if corruptions.get("translated"):
        yield "translated", None, corruptions_lib.translated_test_set(
            images, _CANVAS_MAX_SHIFT,
            seed + 1000 * _SEED_OFFSETS["translated"]), labels
    if corruptions.get("affnist_dir"):
        from keras_caps.datasets import affnist

        yield ("affine", None,
               *affnist.load_test_set(corruptions["affnist_dir"]))
    elif corruptions["affine"]:
        digits, digit_labels = load_test_arrays("mnist", data_dir=data_dir,
                                                download=download)
        yield "affine", None, corruptions_lib.affine_test_set(
            digits, seed + 1000 * _SEED_OFFSETS["affine"]), digit_labels


def column_key(kind, severity):
    """The key of a corruption's results: `"noise:0.1"`, ..., `"affine"`
    (as the comparison's columns, `comparison.columns`)."""
    return kind if severity is None else f"{kind}:{severity}"


def macro_accuracy(labels, predicted):
    """The mean over the classes present in `labels` of their accuracy."""
    labels, predicted = np.asarray(labels), np.asarray(predicted)
    return float(np.mean([np.mean(predicted[labels == label] == label)
                          for label in np.unique(labels)]))
