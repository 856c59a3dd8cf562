"""A trained classifier on clean and corrupted test data.

`evaluate_robustness(model, dataset, corruptions=...)` (and the corruption
flags of `keras-caps evaluate`) classifies the test split of `dataset`
clean and under each corruption of `keras_caps.evaluation.corruptions`,
every model seeing the same corrupted images for the same `seed`.
"""

import time

import keras
import numpy as np

from keras_caps import datasets
from keras_caps import model_roles as roles
from keras_caps.diagnostics.costs import cost_record
from keras_caps.evaluation import corruptions as corruptions_lib
from keras_caps.inference import inference_model

CORRUPTIONS = ("noise", "pixels", "occlusion", "affine")
# Datasets whose test split is single-label image classification.
_SINGLE_LABEL = ("mnist", "fashion_mnist", "mnist_canvas", "smallnorb",
                 "cifar10", "cifar100")
# Seed offsets, so each corruption draws its own random numbers.
_SEED_OFFSETS = {"noise": 1, "pixels": 2, "occlusion": 3, "affine": 4}


def check_corruptions(dataset, corruptions):
    """The corruptions to run on `dataset`, validated and normalised.

    Args:
        dataset: str. A key of `keras_caps.datasets.DATASETS`.
        corruptions: dict or `None`. `"noise"` (Gaussian noise standard
            deviations, fractions of the pixel range in [0, 1]),
            `"pixels"` (fractions of pixels replaced by uniform noise, in
            [0, 1]), `"occlusion"` (square patch sides in pixels, at most
            the image side): lists of severities; `"affine"`: bool, the
            generated affNIST-style test set, only for `"mnist_canvas"`.

    Returns:
        dict with every key of `CORRUPTIONS`: sorted severity lists, and a
        bool for `"affine"`.
    """
    if dataset not in datasets.DATASETS:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(datasets.DATASETS)}"
            f". Received: dataset={dataset!r}")
    if dataset not in _SINGLE_LABEL:
        raise ValueError(
            "Robustness evaluations classify one object per image. "
            f"Expected a dataset among {sorted(_SINGLE_LABEL)}. Received: "
            f"dataset={dataset!r}")
    corruptions = dict(corruptions or {})
    unknown = sorted(set(corruptions) - set(CORRUPTIONS))
    if unknown:
        raise ValueError(
            f"Unknown corruptions {unknown}. Expected some of "
            f"{list(CORRUPTIONS)}. Received: corruptions={corruptions!r}")
    image_size = min(datasets.DATASETS[dataset].input_shape[:2])
    result = {"affine": bool(corruptions.get("affine", False))}
    for kind in ("noise", "pixels", "occlusion"):
        severities = corruptions.get(kind)
        if severities is None:
            severities = []
        if not isinstance(severities, (list, tuple)):
            raise TypeError(
                f"Received an invalid type for the {kind!r} severities, "
                "expected a list of numbers (e.g. [0.1, 0.2]). Received: "
                f"{kind}={severities!r}")
        severities = list(severities)
        checked = [corruptions_lib.check_severity(kind, value, image_size)
                   for value in severities]
        if len(set(checked)) != len(checked):
            raise ValueError(
                f"Duplicate {kind} severities. Received: {severities!r}")
        result[kind] = sorted(checked)
    if result["affine"] and dataset != "mnist_canvas":
        if dataset == "smallnorb":
            reason = (
                "smallNORB images are stereo pairs of one object: one "
                "2-D warp of both views is not a change of viewpoint, and "
                "smallNORB's own test set already holds unseen azimuths "
                "and elevations")
        else:
            reason = (
                f"the generated affine test set warps the 28x28 MNIST test "
                f"digits onto a 40x40 canvas, which {dataset!r} models do "
                "not take")
        raise ValueError(
            f"The affine corruption does not apply to {dataset!r}: "
            f"{reason}. Train and evaluate on dataset 'mnist_canvas' "
            "(MNIST digits placed at random on a 40x40 canvas) for it. "
            f"Received: dataset={dataset!r}, affine=True")
    return result


def load_test_arrays(dataset, *, data_dir=None, seed=42, dataset_options=None,
                     download=True):
    """The test split of `dataset` as NumPy arrays.

    Returns:
        `(images, labels)`: float32 `(n, height, width, channels)` in raw
        pixels, as the loaders yield them, and int64 class ids `(n,)`.
    """
    test = datasets.load(dataset, "test", batch_size=1000,
                         data_dir=data_dir, seed=seed, reconstruction=False,
                         download=download, **(dataset_options or {}))
    images, labels = [], []
    for batch_images, batch_labels in test.as_numpy_iterator():
        images.append(batch_images)
        labels.append(batch_labels.argmax(axis=-1))
    return np.concatenate(images), np.concatenate(labels)


def classifier(model):
    """The image-to-scores part of a model (drops labels and decoder)."""
    if any(layer.name in (roles.LABEL, roles.MASK) for layer in model.layers):
        return inference_model(model)
    return model


def corrupted_test_sets(dataset, images, labels, corruptions, seed, *,
                        data_dir=None, download=True):
    """Yields `(kind, severity, images, labels)` for each corruption.

    `kind` is a key of `CORRUPTIONS`; `severity` is `None` for the affine
    set, which is generated from the MNIST test digits.
    """
    for kind, function in (("noise", corruptions_lib.gaussian_noise),
                           ("pixels", corruptions_lib.pixel_corruption),
                           ("occlusion", corruptions_lib.occlusion)):
        for index, severity in enumerate(corruptions[kind]):
            yield kind, severity, function(
                images, severity,
                seed + 1000 * _SEED_OFFSETS[kind] + index), labels
    if corruptions["affine"]:
        digits, digit_labels = load_test_arrays("mnist", data_dir=data_dir,
                                                download=download)
        yield "affine", None, corruptions_lib.affine_test_set(
            digits, seed + 1000 * _SEED_OFFSETS["affine"]), digit_labels


def evaluate_robustness(model, dataset, *, corruptions=None, data_dir=None,
                        seed=42, batch_size=256, dataset_options=None,
                        download=True):
    """Accuracy of a classifier on clean and corrupted test images.

    Args:
        model: A `keras.Model` from an application builder (or a path to
            its `.keras` file). Models with a decoder are evaluated through
            `keras_caps.inference.inference_model`.
        dataset: str. The dataset the model was trained on.
        corruptions: dict or `None`; see `check_corruptions`. Clean
            accuracy only when `None`.
        data_dir: str or `None`. The data folder.
        seed: int. Seeds the corruptions. Defaults to `42`.
        batch_size: int. Prediction batch size. Defaults to `256`.
        dataset_options: dict or `None`. Options of the test loader.
        download: bool. Without a data folder, let TFDS download the
            dataset if it is not prepared. Defaults to `True`.

    Returns:
        dict: `"clean"` with `accuracy`, `macro_accuracy` (the mean over
        classes of the per-class accuracy), `images_per_second` (the clean
        pass, after a warm-up batch) and `num_images`; `"noise"`,
        `"pixels"`, `"occlusion"`: severity (as a string) -> accuracy;
        `"affine"`: accuracy or `None`; `"trainable_parameters"` of the
        classifier (decoder excluded); its costs
        (`keras_caps.diagnostics.costs.cost_record`:
        `"trainable_parameters_with_decoder"`, `"decoder_parameters"`,
        `"multiply_adds"` of the classifier path, `"decoder_multiply_adds"`);
        `"seed"`, `"dataset"`.

    Example:

    >>> record = evaluate_robustness(  # doctest: +SKIP
    ...     "runs/efficient_capsnet_mnist/model.keras", "mnist",
    ...     corruptions={"noise": [0.1, 0.2], "occlusion": [8]})
    >>> record["noise"]["0.2"]  # doctest: +SKIP
    0.9876
    """
    corruptions = check_corruptions(dataset, corruptions)
    if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
        model = keras.saving.load_model(model)
    predictor = classifier(model)
    images, labels = load_test_arrays(dataset, data_dir=data_dir, seed=seed,
                                      dataset_options=dataset_options,
                                      download=download)

    predict, scores = clean_scores(predictor, images, labels, batch_size)
    record = {"dataset": dataset, "seed": seed, **scores,
              **cost_record(model)}
    for kind, severity, corrupted, truth in corrupted_test_sets(
            dataset, images, labels, corruptions, seed, data_dir=data_dir,
            download=download):
        accuracy = float(np.mean(predict(corrupted) == truth))
        if kind == "affine":
            record["affine"] = accuracy
        else:
            record[kind][str(severity)] = accuracy
    return record


def macro_accuracy(labels, predicted):
    """The mean over the classes present in `labels` of their accuracy."""
    labels, predicted = np.asarray(labels), np.asarray(predicted)
    return float(np.mean([np.mean(predicted[labels == label] == label)
                          for label in np.unique(labels)]))


def clean_scores(predictor, images, labels, batch_size):
    """Scores `predictor` on clean test images, timing the pass.

    Args:
        predictor: The classifier (`classifier(model)`).
        images: float32 array `(num_images, height, width, channels)`,
            raw pixels.
        labels: int array `(num_images,)`, the true classes.
        batch_size: int. The prediction batch size.

    Returns:
        `(predict, record)`: `predict(batch)` gives the predicted classes
        of a batch of images; `record` holds `"trainable_parameters"`, the
        `"clean"` entry of `evaluate_robustness` (its images per second
        measured after a warm-up batch that traces the function) and empty
        corruption entries.

    Example:

    ```python
    predict, record = clean_scores(classifier(model), images, labels, 256)
    record["clean"]["accuracy"]
    ```
    """
    def predict(batch):
        scores = predictor.predict(batch, batch_size=batch_size, verbose=0)
        return np.asarray(scores).argmax(axis=-1)

    predict(images[:batch_size])  # Warm-up: traces the function.
    start = time.perf_counter()
    predicted = predict(images)
    seconds = time.perf_counter() - start
    return predict, {
        "trainable_parameters": int(sum(
            np.prod(weight.shape) for weight in predictor.trainable_weights)),
        "clean": {
            "accuracy": float(np.mean(predicted == labels)),
            "macro_accuracy": macro_accuracy(labels, predicted),
            "images_per_second": float(len(images) / max(seconds, 1e-9)),
            "num_images": int(len(images)),
        },
        "noise": {}, "pixels": {}, "occlusion": {}, "affine": None,
    }
