"""A multi-digit classifier (MultiMNIST) on clean and corrupted test images.

MultiMNIST (Sabour et al., 2017, Section 6) overlays two digits of
different classes; a model is scored on its two highest class scores:
per-digit accuracy (the share of the true digits among them: 1, 0.5 or 0
per image) and exact-match accuracy (both digits among them, Sabour et
al.'s criterion for an image classified correctly). Overlap is the
challenge, so corruptions ask whether a model still separates the digits
when the image is degraded. `evaluate_multi_digit_robustness` measures
both scores on the clean MultiMNIST test pairs and under each corruption
of `keras_caps.evaluation.corruptions` (noise, pixels, occlusion; the
same seeded corruptions as `keras_caps.evaluation.evaluate_robustness`,
which calls it for `"multi_mnist"`).

The test set holds `partners_per_digit` pairs per MNIST test digit
(10,000 x 1,000 = 10 million by default); the corrupted copies are held
in memory, so `partners_per_digit` must be given (e.g. 10: 100,000
pairs, 0.5 GB of float32 pixels).

Reference:
- [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
"""

import time

import numpy as np

MULTI_DIGIT_DATASETS = ("multi_mnist",)
NUM_DIGITS = 2


def check_multi_digit_evaluation(dataset, dataset_options=None,
                                 predictions_dir=None,
                                 adapt_batchnorm=False, attacks=None):
    """Refuses what a robustness evaluation of a multi-digit `dataset`
    cannot do; nothing for other datasets.

    Raises:
        ValueError: no `partners_per_digit` in `dataset_options`, or
            `predictions_dir` / `adapt_batchnorm` / `attacks` asked for
            (they are written for one label per image).
    """
    if dataset not in MULTI_DIGIT_DATASETS:
        return
    if attacks:
        raise ValueError(
            "The attacks (--fgsm, --pgd) raise a loss on one label per "
            "image; they do not apply to MultiMNIST yet. Received: "
            f"dataset={dataset!r}, attacks={attacks!r}")
    if (dataset_options or {}).get("partners_per_digit") is None:
        raise ValueError(
            "A robustness evaluation on MultiMNIST holds every corrupted "
            "test pair in memory: give `partners_per_digit` "
            "(--partners-per-digit, e.g. 10 for 100,000 pairs); the "
            "default 1000 makes 10 million. Received: dataset_options="
            f"{dataset_options!r}")
    if predictions_dir is not None or adapt_batchnorm:
        raise ValueError(
            "`predictions_dir` (--predictions-dir) and `adapt_batchnorm` "
            "(--adapt-batchnorm) are written for one label per image; "
            "they do not apply to MultiMNIST yet. Received: "
            f"predictions_dir={predictions_dir!r}, "
            f"adapt_batchnorm={adapt_batchnorm!r}")


def digit_scores(scores, multi_hot, num_digits=NUM_DIGITS):
    """Per-digit and exact-match correctness of each image.

    Args:
        scores: float array `(n, classes)`: class scores (capsule lengths,
            probabilities).
        multi_hot: array `(n, classes)` with `num_digits` ones per row.
        num_digits: int. Digits per image. Defaults to `2`.

    Returns:
        `(per_digit, exact)`: float64 `(n,)`, the share of the true
        digits among the `num_digits` highest scores; bool `(n,)`, all of
        them are.

    Example:

    >>> per_digit, exact = digit_scores(
    ...     np.array([[0.9, 0.8, 0.1], [0.9, 0.1, 0.8]]),
    ...     np.array([[1, 1, 0], [1, 1, 0]]))
    >>> per_digit.tolist(), exact.tolist()
    ([1.0, 0.5], [True, False])
    """
    scores = np.asarray(scores)
    top = np.argsort(-scores, axis=-1, kind="stable")[:, :num_digits]
    found = np.take_along_axis(np.asarray(multi_hot), top, axis=-1).sum(-1)
    return found / num_digits, found == num_digits


def load_multi_digit_test_arrays(dataset, *, data_dir=None, seed=42,
                                 dataset_options=None, download=True):
    """The test pairs of `dataset` as NumPy arrays.

    Returns:
        `(images, multi_hot)`: float32 `(n, 36, 36, 1)` raw pixels and
        float32 `(n, 10)` with a one for each digit.
    """
    # Imported here: keras_caps.evaluation.robustness imports this module.
    from keras_caps.evaluation.robustness import load_test_arrays

    return load_test_arrays(dataset, data_dir=data_dir, seed=seed,
                            dataset_options=dataset_options,
                            download=download, class_ids=False)


def evaluate_multi_digit_robustness(model, dataset, corruptions, *,
                                    data_dir=None, seed=42, batch_size=256,
                                    dataset_options=None, download=True):
    """Per-digit and exact-match accuracy, clean and under `corruptions`.

    Args:
        model: A loaded `keras.Model` (a decoder model is read through
            `keras_caps.inference.inference_model`).
        dataset: str. `"multi_mnist"`.
        corruptions: dict, checked by
            `keras_caps.evaluation.robustness.check_corruptions`.
        data_dir, seed, batch_size, dataset_options, download: As
            `keras_caps.evaluation.evaluate_robustness`;
            `dataset_options` must give `partners_per_digit`.

    Returns:
        dict: `"clean"` with `accuracy` (per-digit), `exact_match`,
        `images_per_second` and `num_images`; `"noise"`, `"pixels"`,
        `"occlusion"`: severity (as a string) -> per-digit accuracy;
        `"exact_match"`: column key (`"clean"`, `"noise:0.1"`, ...) ->
        exact-match accuracy; `"affine"`: `None`; `"num_digits"`;
        `"trainable_parameters"` and the costs of
        `keras_caps.diagnostics.costs.cost_record`; `"seed"`,
        `"dataset"`.

    Example:

    ```python
    record = evaluate_robustness(
        "runs/efficient_capsnet_multi_mnist/model.keras", "multi_mnist",
        corruptions={"noise": [0.1]},
        dataset_options={"partners_per_digit": 10})
    record["noise"]["0.1"], record["exact_match"]["noise:0.1"]
    ```
    """
    from keras_caps.diagnostics.costs import cost_record
    from keras_caps.evaluation import robustness

    check_multi_digit_evaluation(dataset, dataset_options)
    predictor = robustness.classifier(model)
    images, multi_hot = load_multi_digit_test_arrays(
        dataset, data_dir=data_dir, seed=seed,
        dataset_options=dataset_options, download=download)

    def score(batch, truth):
        scores = predictor.predict(batch, batch_size=batch_size, verbose=0)
        per_digit, exact = digit_scores(scores, truth)
        return float(per_digit.mean()), float(exact.mean())

    score(images[:batch_size], multi_hot[:batch_size])  # Warm-up.
    start = time.perf_counter()
    accuracy, exact_match = score(images, multi_hot)
    seconds = time.perf_counter() - start
    record = {
        "dataset": dataset, "seed": seed, "num_digits": NUM_DIGITS,
        "trainable_parameters": int(sum(
            np.prod(weight.shape) for weight in predictor.trainable_weights)),
        "clean": {"accuracy": accuracy, "exact_match": exact_match,
                  "images_per_second": float(len(images)
                                             / max(seconds, 1e-9)),
                  "num_images": int(len(images))},
        "noise": {}, "pixels": {}, "occlusion": {}, "affine": None,
        "exact_match": {"clean": exact_match},
        **cost_record(model),
    }
    for kind, severity, corrupted, truth in robustness.corrupted_test_sets(
            dataset, images, multi_hot, corruptions, seed):
        accuracy, exact_match = score(corrupted, truth)
        record[kind][str(severity)] = accuracy
        record["exact_match"][robustness.column_key(kind, severity)] = (
            exact_match)
    return record
