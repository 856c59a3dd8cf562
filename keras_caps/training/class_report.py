"""Per-class precision, recall and F1 of a single-label classifier, with
its confusion matrix: what `keras-caps evaluate --class-report` writes.

For class `c`, with `n[i, j]` the test images of class `i` predicted as
`j`: precision `n[c, c] / sum_i n[i, c]` (of the images predicted `c`,
the share that are), recall `n[c, c] / sum_j n[c, j]` (of the images of
`c`, the share found), F1 their harmonic mean `2 p r / (p + r)`. A class
never predicted has no precision and one absent from the test set has no
recall (`None`, JSON `null`); its F1 is `None` too. The macro averages
are over the classes present in the test set, an undefined precision
counting as 0 (a class the model never predicts is a failure, not a
class to leave out; scikit-learn's `zero_division=0`); the weighted ones
weigh each class by its test images (support).
"""

import numpy as np

MULTI_LABEL_DATASETS = ("multi_mnist",)
"""Built-in datasets whose images hold more than one class: a class
report scores one class per image."""


def confusion_matrix(labels, predicted, num_classes):
    """Counts of true class (rows) against predicted class (columns).

    Example:

    >>> confusion_matrix([0, 1, 1], [0, 0, 1], 2).tolist()
    [[1, 0], [1, 1]]
    """
    labels = np.asarray(labels).astype("int64")
    predicted = np.asarray(predicted).astype("int64")
    if labels.shape != predicted.shape:
        raise ValueError(
            "Expected as many predictions as labels. Received: "
            f"labels of shape {labels.shape}, predictions of shape "
            f"{predicted.shape}")
    flat = labels * num_classes + predicted
    return np.bincount(flat, minlength=num_classes * num_classes).reshape(
        num_classes, num_classes)


def check_single_label(dataset, flag="--class-report"):
    """Raises a one-line `ValueError` for a dataset of several classes
    per image.

    Example:

    >>> check_single_label("multi_mnist")
    Traceback (most recent call last):
    ...
    ValueError: --class-report scores one class per image, which \
'multi_mnist''s images do not have (two digits each). Received: \
dataset='multi_mnist'
    """
    if dataset in MULTI_LABEL_DATASETS:
        raise ValueError(
            f"{flag} scores one class per image, which {dataset!r}'s "
            f"images do not have (two digits each). Received: "
            f"dataset={dataset!r}")


def class_report(labels, predicted, class_names):
    """Per-class precision, recall, F1 and support, their macro and
    weighted averages, the accuracy and the confusion matrix.

    Args:
        labels: int array `(images,)`, the true classes.
        predicted: int array `(images,)`, the predicted classes.
        class_names: list of str, one per class, in class-id order.

    Returns:
        dict (JSON-ready): `"classes"` (one dict per class: `"class"`,
        `"precision"`, `"recall"`, `"f1"`, `"support"`, `"predicted"`),
        `"macro"` and `"weighted"` (`"precision"`, `"recall"`, `"f1"`),
        `"accuracy"`, `"images"`, `"confusion_matrix"` (rows the true
        classes, columns the predicted ones, as lists of ints).

    Example:

    >>> report = class_report([0, 0, 1, 1], [0, 1, 1, 1], ["cat", "dog"])
    >>> report["classes"][1]["precision"], report["classes"][1]["recall"]
    (0.6666666666666666, 1.0)
    >>> report["confusion_matrix"]
    [[1, 1], [0, 2]]
    """
    confusion = confusion_matrix(labels, predicted, len(class_names))
    hits = np.diag(confusion).astype("float64")
    support = confusion.sum(axis=1)
    predicted_counts = confusion.sum(axis=0)
    precision = _ratios(hits, predicted_counts)
    recall = _ratios(hits, support)
    f1 = [None if p is None or r is None else
          (0.0 if p + r == 0 else 2 * p * r / (p + r))
          for p, r in zip(precision, recall)]
    images = int(support.sum())
    return {
        "classes": [
            {"class": name, "precision": p, "recall": r, "f1": f,
             "support": int(s), "predicted": int(c)}
            for name, p, r, f, s, c in zip(class_names, precision, recall,
                                           f1, support, predicted_counts)],
        "macro": _averages(precision, recall, f1, support, weighted=False),
        "weighted": _averages(precision, recall, f1, support, weighted=True),
        "accuracy": float(hits.sum() / images) if images else None,
        "images": images,
        "confusion_matrix": confusion.tolist(),
    }


def _ratios(numerators, denominators):
    """`n / d` per class as floats, `None` where `d` is 0."""
    return [float(n / d) if d else None
            for n, d in zip(numerators, denominators)]


def _averages(precision, recall, f1, support, weighted):
    """The three averages over the classes in the test set (support > 0),
    an undefined value counting as 0; weighted by support if asked."""
    present = support > 0
    if not present.any():
        return {"precision": None, "recall": None, "f1": None}
    weights = np.where(present, support if weighted else 1, 0).astype(
        "float64")
    weights /= weights.sum()
    return {name: float(sum(weight * (value or 0.0)
                            for weight, value in zip(weights, values)))
            for name, values in (("precision", precision),
                                 ("recall", recall), ("f1", f1))}
