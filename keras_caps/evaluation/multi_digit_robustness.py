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

With `predictions_dir` it saves per-digit predictions (`matched_digits`:
each true digit paired with the class among the two highest scores that
stands for it), so that a comparison tests models image by image
(McNemar); with `adapt_batchnorm=True` each set is classified a second
time with the BatchNorm statistics re-estimated on it, as
`evaluate_robustness` does for one label per image.

The test set holds `partners_per_digit` pairs per MNIST test digit
(10,000 x 1,000 = 10 million by default); the corrupted copies are held
in memory, so `partners_per_digit` must be given (e.g. 10: 100,000
pairs, 0.5 GB of float32 pixels).

Reference:
- [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
"""

import time

import numpy as np

from keras_caps.evaluation import test_sets

MULTI_DIGIT_DATASETS = ("multi_mnist",)
NUM_DIGITS = 2
# The comparison's exact-match columns: "exact_match:clean",
# "exact_match:noise:0.1", ...; the other columns hold per-digit accuracy.
EXACT_MATCH_PREFIX = "exact_match:"


def check_multi_digit_evaluation(dataset, dataset_options=None,
                                 attacks=None):
    """Refuses what a robustness evaluation of a multi-digit `dataset`
    cannot do; nothing for other datasets.

    Raises:
        ValueError: no `partners_per_digit` in `dataset_options`, or
            `attacks` asked for (they raise a loss on one label per
            image).
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


def matched_digits(scores, multi_hot, num_digits=NUM_DIGITS):
    """Each true digit and the predicted class that stands for it.

    The `num_digits` highest scores are the predicted digits (Sabour et
    al., 2017, Section 6: the two longest class capsules). A true digit
    among them is matched to itself; the true digits not found are
    matched, in ascending order, to the predicted classes that are not
    true digits, in ascending order. So a digit is right exactly when it
    is among the highest scores: the mean of `predicted == true` is the
    per-digit accuracy of `digit_scores`, and an image is an exact match
    when both its rows agree; a wrong digit is paired with the class it
    was mistaken for (for confusion matrices).

    Args:
        scores: float array `(n, classes)`: class scores.
        multi_hot: array `(n, classes)` with `num_digits` ones per row.
        num_digits: int. Digits per image. Defaults to `2`.

    Returns:
        `(true, predicted)`: int64 arrays `(n, num_digits)`, the true
        digits of each image in ascending order and their matched
        predicted classes.

    Example:

    >>> true, predicted = matched_digits(
    ...     np.array([[0.9, 0.8, 0.1, 0.0], [0.1, 0.9, 0.0, 0.8]]),
    ...     np.array([[1, 0, 1, 0], [1, 1, 0, 0]]))
    >>> true.tolist(), predicted.tolist()
    ([[0, 2], [0, 1]], [[0, 1], [3, 1]])
    """
    scores, multi_hot = np.asarray(scores), np.asarray(multi_hot)
    top = np.sort(np.argsort(-scores, axis=-1, kind="stable")
                  [:, :num_digits], axis=-1)  # (n, k), ascending
    true = np.sort(np.argsort(-multi_hot, axis=-1, kind="stable")
                   [:, :num_digits], axis=-1)  # (n, k), ascending
    found = (true[:, :, None] == top[:, None, :]).any(-1)  # (n, k)
    is_true = (top[:, :, None] == true[:, None, :]).any(-1)  # (n, k)
    # The predicted classes that are no true digit first, ascending.
    spare = np.take_along_axis(
        top, np.argsort(is_true, axis=-1, kind="stable"), axis=-1)
    rank = np.maximum(np.cumsum(~found, axis=-1) - 1, 0)  # (n, k)
    predicted = np.where(found, true,
                         np.take_along_axis(spare, rank, axis=-1))
    return true.astype("int64"), predicted.astype("int64")


def pair_share(predicted):
    """The share of the images given the most frequent set of predicted
    digits: about 1 / 45 for a working MultiMNIST model (45 pairs of
    distinct classes), 1.0 when every image gets the same pair (a
    collapse).

    Args:
        predicted: int array `(n, num_digits)` (`matched_digits`).

    Example:

    >>> pair_share(np.array([[0, 3], [3, 0], [1, 2], [0, 3]]))
    0.75
    """
    predicted = np.sort(np.asarray(predicted), axis=-1)
    if len(predicted) == 0:
        return float("nan")
    _, counts = np.unique(predicted, axis=0, return_counts=True)
    return float(counts.max() / len(predicted))


def exact_match_correct(correct, num_digits=NUM_DIGITS):
    """Per image, whether all its digits are right, from the per-digit
    correctness of the saved predictions (`num_digits` a row, image
    after image, as `matched_digits` flattened).

    Example:

    >>> exact_match_correct(np.array([True, True, True, False])).tolist()
    [True, False]
    """
    return np.asarray(correct).reshape(-1, num_digits).all(axis=-1)


def load_multi_digit_test_arrays(dataset, *, data_dir=None, seed=42,
                                 dataset_options=None, download=True):
    """The test pairs of `dataset` as NumPy arrays.

    Returns:
        `(images, multi_hot)`: float32 `(n, 36, 36, 1)` raw pixels and
        float32 `(n, 10)` with a one for each digit.
    """
    return test_sets.load_test_arrays(dataset, data_dir=data_dir, seed=seed,
                                      dataset_options=dataset_options,
                                      download=download, class_ids=False)


def evaluate_multi_digit_robustness(model, dataset, corruptions, *,
                                    data_dir=None, seed=42, batch_size=256,
                                    dataset_options=None, download=True,
                                    predictions_dir=None,
                                    adapt_batchnorm=False):
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
        predictions_dir: str or `None`. Also write the predictions of
            every digit (`predictions.npz`, `confusion.npz`; see
            `keras_caps.evaluation.predictions`): `"labels"` the true
            digits, two per image in ascending order, image after image,
            and under each column key the matched predicted classes
            (`matched_digits`).
        adapt_batchnorm: bool. Also score each set with the BatchNorm
            statistics re-estimated on it (see
            `keras_caps.evaluation.batchnorm_adaptation`).

    Returns:
        dict: `"clean"` with `accuracy` (per-digit), `exact_match`,
        `macro_accuracy` (the mean over classes of the share of their
        digits found), `images_per_second` and `num_images`; `"noise"`,
        `"pixels"`, `"occlusion"`: severity (as a string) -> per-digit
        accuracy; `"exact_match"`: column key (`"clean"`, `"noise:0.1"`,
        ...) -> exact-match accuracy; `"majority_share"`: column key
        (with the exact-match keys `"exact_match:clean"`, ...) ->
        `pair_share`; with `adapt_batchnorm`, `"adapted"`: `{"accuracy":
        {key: ...}, "majority_share": {key: ...}, "batchnorm_layers":
        n}`; `"affine"`: `None`; `"num_digits"`;
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

    check_multi_digit_evaluation(dataset, dataset_options)
    predictor = test_sets.classifier(model)
    images, multi_hot = load_multi_digit_test_arrays(
        dataset, data_dir=data_dir, seed=seed,
        dataset_options=dataset_options, download=download)
    sets = _DigitSets(predictor, batch_size)
    sets.predict(images[:batch_size], multi_hot[:batch_size])  # Warm-up.
    start = time.perf_counter()
    sets.add("clean", images, multi_hot)
    seconds = time.perf_counter() - start
    if adapt_batchnorm:
        sets.adapt("clean", images, multi_hot)
    clean = sets.scores["clean"]
    record = {
        "dataset": dataset, "seed": seed, "num_digits": NUM_DIGITS,
        "trainable_parameters": int(sum(
            np.prod(weight.shape) for weight in predictor.trainable_weights)),
        "clean": {"accuracy": clean["accuracy"],
                  "exact_match": clean["exact_match"],
                  "macro_accuracy": test_sets.macro_accuracy(
                      sets.predictions[_LABELS],
                      sets.predictions["clean"]),
                  "images_per_second": float(len(images)
                                             / max(seconds, 1e-9)),
                  "num_images": int(len(images))},
        "noise": {}, "pixels": {}, "occlusion": {}, "affine": None,
        **cost_record(model),
    }
    for kind, severity, corrupted, truth in test_sets.corrupted_test_sets(
            dataset, images, multi_hot, corruptions, seed):
        key = test_sets.column_key(kind, severity)
        sets.add(key, corrupted, truth)
        if adapt_batchnorm:
            sets.adapt(key, corrupted, truth)
        record[kind][str(severity)] = sets.scores[key]["accuracy"]
    record.update(sets.record(adapt_batchnorm))
    if predictions_dir is not None:
        from keras_caps.evaluation import predictions as predictions_lib

        predictions_lib.write_predictions(
            predictions_dir, sets.predictions, predictor.output_shape[-1])
    return record


_LABELS = "labels"  # `keras_caps.evaluation.predictions.LABELS`
_ADAPTED = "adapted:"  # `keras_caps.evaluation.predictions.ADAPTED_PREFIX`


class _DigitSets:
    """The matched digits and scores of every evaluated set, by key."""

    def __init__(self, predictor, batch_size):
        self.predictor = predictor
        self.batch_size = batch_size
        self.predictions = {}  # key -> matched predicted digits (2n,)
        self.scores = {}  # key -> accuracy, exact_match, majority_share
        self.adapted_layers = 0

    def predict(self, images, multi_hot):
        """`(true, predicted)` digits of `images` (`matched_digits`)."""
        scores = self.predictor.predict(images, batch_size=self.batch_size,
                                        verbose=0)
        return matched_digits(scores, multi_hot)

    def add(self, key, images, multi_hot):
        """Scores `images` under `key`."""
        self._keep(key, *self.predict(images, multi_hot))

    def adapt(self, key, images, multi_hot):
        """Scores `images` again under `adapted:<key>`, with BatchNorm
        statistics adapted to them (the plain ones if it has none)."""
        from keras_caps.evaluation import batchnorm_adaptation

        with batchnorm_adaptation.adapted_batchnorm(
                self.predictor, images, self.batch_size) as layers:
            self.adapted_layers = len(layers)
            if layers:
                true, predicted = self.predict(images, multi_hot)
            else:  # Nothing adapted: the plain predictions.
                true, predicted = (
                    self.predictions[name].reshape(-1, NUM_DIGITS)
                    for name in (_LABELS, key))
        self._keep(_ADAPTED + key, true, predicted)

    def _keep(self, key, true, predicted):
        self.predictions.setdefault(_LABELS, true.reshape(-1))
        self.predictions[key] = predicted.reshape(-1)
        correct = predicted == true  # (n, num_digits)
        self.scores[key] = {
            "accuracy": float(correct.mean()),
            "exact_match": float(correct.all(axis=-1).mean()),
            "majority_share": pair_share(predicted)}

    def record(self, adapted):
        """`"exact_match"`, `"majority_share"` (and `"adapted"`)."""
        plain = [key for key in self.scores if not key.startswith(_ADAPTED)]
        result = {"exact_match": {key: self.scores[key]["exact_match"]
                                  for key in plain},
                  "majority_share": self._by_column(plain, "majority_share")}
        if adapted:
            result["adapted"] = {
                "accuracy": self._by_column(plain, "accuracy", _ADAPTED),
                "majority_share": self._by_column(plain, "majority_share",
                                                  _ADAPTED),
                "batchnorm_layers": self.adapted_layers}
        return result

    def _by_column(self, keys, name, prefix=""):
        """`name` of each set under its column key and its exact-match
        column key (accuracy: per-digit, then exact-match)."""
        values = {}
        for key in keys:
            scores = self.scores[prefix + key]
            values[key] = scores[name]
            values[EXACT_MATCH_PREFIX + key] = scores[
                "exact_match" if name == "accuracy" else name]
        return values
