"""Per-image predictions of a robustness evaluation, and what they give.

`keras_caps.evaluation.evaluate_robustness(..., predictions_dir=FOLDER)`
(and, for every model, `keras-caps compare`, next to each model's
`robustness.json`) writes `FOLDER/predictions.npz`: NumPy's `.npz` (a zip
of `.npy` arrays, compressed), one 1-D array per key, image `i` of every
array being image `i` of the same test set, in the test split's order:

- `"labels"`: the true classes of the test images;
- `"clean"`: the predicted classes on the clean test images;
- `"noise:<std>"`, `"pixels:<fraction>"`, `"occlusion:<side>"`: the
  predicted classes under each corruption, keyed as the comparison's
  columns (`keras_caps.compare.comparison_results.columns`: the severity as
  Python prints the checked number, e.g. `"noise:0.1"`, `"occlusion:8"`);
- `"affine"` and `"labels:affine"`: the predictions on the affine test
  set and its true classes (the generated set of the MNIST test digits,
  or affNIST's 320,000 images: another set of images than `"labels"`'s),
  when it was evaluated;
- `"translated"`: the predictions on the translated canvas test images
  (the clean test images moved, so `"labels"` are their classes);
- `"viewpoints:familiar"` and `"viewpoints:novel"`, with their true
  classes under `"labels:viewpoints:familiar"` and
  `"labels:viewpoints:novel"`: the clean predictions of the test images
  seen from the familiar and from the novel viewpoints (smallNORB's
  `viewpoints`, Hinton et al. 2018, §5.1), each in test-split order;
- `"fgsm:<epsilon>"`, `"pgd:<epsilon>"`, `"vote_pgd:<epsilon>"`,
  `"transfer_pgd:<epsilon>"`: the predictions on the attacked images
  (`keras_caps.evaluation.attack_evaluation`); when the attacks ran on the
  first N test images only (`"attack_images"`), their true classes are
  under `"labels:attacks"` (N of them), else `"labels"`'s;
- `"adapted:<key>"` for each key above but the labels: the predictions
  with the BatchNorm statistics re-estimated on that set
  (`adapt_batchnorm=True`; see
  `keras_caps.evaluation.batchnorm_adaptation`).

On MultiMNIST (two digits an image) every array holds one entry per
digit, two per image, image after image: `"labels"` the true digits in
ascending order, each key the predicted class matched to each (see
`keras_caps.evaluation.multi_digit_robustness.matched_digits`).

Classes are `uint8` when every class id fits (under 256 classes), else
`int16`. `read_predictions(folder)` reads the file back as a dict of
arrays; `confusion_matrices(predictions, num_classes)` counts, for each
key, true class (row) against predicted class (column); the evaluation
writes them to `FOLDER/confusion.npz` (`int64`, `(classes, classes)`, the
same keys, `"labels"` excepted). `majority_share(predicted)` is the share
of the most frequent predicted class: 1 / classes for a balanced test
set classified perfectly, 1.0 for a model that predicts one class for
every image (a collapse).
"""

import io
import os
import zipfile

import numpy as np

from keras_caps.runs.atomic_files import write_atomically
from keras_caps.training.class_report import confusion_matrix

PREDICTIONS_FILE = "predictions.npz"
CONFUSION_FILE = "confusion.npz"
LABELS = "labels"
AFFINE_LABELS = "labels:affine"
ADAPTED_PREFIX = "adapted:"
# Sets of their own images (a subset of the test images, or other
# images), whose true classes are under "labels:<key>".
VIEWPOINT_KEYS = ("viewpoints:familiar", "viewpoints:novel")
# The true classes of the attack columns when the attacks ran on a subset
# of the test images (the first N); a file without them (every image
# attacked, or written before subsets existed) pairs them with "labels".
ATTACK_LABELS = "labels:attacks"
ATTACK_PREFIXES = ("fgsm:", "pgd:", "vote_pgd:", "transfer_pgd:")
# The version of this format, recorded in a comparison's evaluation
# settings: a `robustness.json` of another version is evaluated again.
FORMAT = 1


def class_dtype(num_classes):
    """The compact integer type of class ids below `num_classes`."""
    return np.uint8 if num_classes <= 256 else np.int16


def majority_share(predicted):
    """The share of the images predicted as the most frequent class.

    Args:
        predicted: int array `(num_images,)`, the predicted classes.

    Returns:
        float in `[0, 1]`; `nan` for no image.

    Example:

    >>> majority_share([3, 3, 1, 3])
    0.75
    """
    predicted = np.asarray(predicted).astype("int64").reshape(-1)
    if predicted.size == 0:
        return float("nan")
    return float(np.bincount(predicted).max() / predicted.size)


def labels_of(key, available=None):
    """The key of the true classes of the predictions under `key`.

    Args:
        key: str. A predictions key.
        available: the keys of the predictions (a dict or a list) `key`
            is among: an attack column's classes are `ATTACK_LABELS` when
            these hold them (attacks on a subset), else `"labels"`.

    Example:

    >>> labels_of("pgd:0.1"), labels_of("pgd:0.1", ["labels:attacks"])
    ('labels', 'labels:attacks')
    """
    base = key[len(ADAPTED_PREFIX):] if key.startswith(ADAPTED_PREFIX) \
        else key
    if base.startswith(ATTACK_PREFIXES):
        return (ATTACK_LABELS if available is not None
                and ATTACK_LABELS in available else LABELS)
    if base in VIEWPOINT_KEYS:
        return f"{LABELS}:{base}"
    return AFFINE_LABELS if base == "affine" else LABELS


def is_labels_key(key):
    """Whether `key` holds true classes (`"labels"`, `"labels:<key>"`)
    rather than predictions.

    Example:

    >>> is_labels_key("labels:affine"), is_labels_key("affine")
    (True, False)
    """
    return key == LABELS or key.startswith(f"{LABELS}:")


def confusion_matrices(predictions, num_classes):
    """A confusion matrix per key of `predictions` (`read_predictions`).

    Returns:
        dict: key -> int64 `(num_classes, num_classes)`, rows the true
        classes, columns the predicted ones; no entry for the labels.

    Example:

    ```python
    matrices = confusion_matrices(read_predictions(folder), 10)
    matrices["noise:0.2"].sum(axis=0)  # how often each class is predicted
    ```
    """
    return {key: confusion_matrix(predictions[labels_of(key, predictions)],
                                  predicted, num_classes)
            for key, predicted in predictions.items()
            if not is_labels_key(key)}


def _write_npz(path, arrays):
    def write(temporary):
        with open(temporary, "wb") as file:
            np.savez_compressed(file, **arrays)

    write_atomically(path, write)


def write_predictions(folder, predictions, num_classes):
    """Writes `predictions.npz` and `confusion.npz` in `folder`, each
    through a temporary file (a killed write leaves no half file).

    Args:
        folder: str. Where to write them.
        predictions: dict. Key (see the module docstring) -> class ids.
        num_classes: int. The model's classes.

    Example:

    ```python
    write_predictions("runs/x", {"labels": labels, "clean": predicted}, 10)
    ```
    """
    dtype = class_dtype(num_classes)
    arrays = {key: np.asarray(value).astype(dtype)
              for key, value in predictions.items()}
    _write_npz(os.path.join(folder, PREDICTIONS_FILE), arrays)
    _write_npz(os.path.join(folder, CONFUSION_FILE),
               confusion_matrices(arrays, num_classes))


def read_predictions(folder):
    """The per-image predictions a robustness evaluation saved in `folder`.

    Args:
        folder: str. The folder holding `predictions.npz` (in a
            comparison, a model's folder,
            `keras_caps.compare.model_runs.run_dir(...)`), or the path
            of the file itself.

    Returns:
        dict: key (see the module docstring) -> 1-D integer array.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not such a record (unreadable, or without
            `"labels"`, or with arrays that are not 1-D integers of the
            length of their labels); the message names the file.

    Example:

    ```python
    predictions = read_predictions("runs/compare/models/dynamic_seed0")
    accuracy = (predictions["noise:0.2"] == predictions["labels"]).mean()
    ```
    """
    path = folder
    if os.path.isdir(folder) or not folder.endswith(".npz"):
        path = os.path.join(folder, PREDICTIONS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No per-image predictions at {path!r}: evaluate the model "
            "with `predictions_dir` (a comparison writes them for every "
            "model; one made by an earlier keras_caps is evaluated again "
            "when resumed).")
    try:
        with open(path, "rb") as file:
            content = io.BytesIO(file.read())
        with np.load(content, allow_pickle=False) as data:
            predictions = {key: data[key] for key in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ValueError(
            f"{path!r} is not a readable predictions file ({error}). "
            "Delete it and evaluate the model again.") from None
    _check_predictions(path, predictions)
    return predictions


def _check_predictions(path, predictions):
    if LABELS not in predictions:
        raise ValueError(
            f"{path!r} is not a predictions file: it has no {LABELS!r} "
            f"array. Received keys: {sorted(predictions)}")
    for key, array in predictions.items():
        reference = (key if is_labels_key(key)
                     else labels_of(key, predictions))
        expected = len(predictions.get(reference, ()))
        if (array.ndim != 1 or not np.issubdtype(array.dtype, np.integer)
                or len(array) != expected):
            raise ValueError(
                f"{path!r} is not a predictions file: {key!r} should be "
                f"a 1-D integer array of {expected} classes. Received: "
                f"shape {array.shape}, dtype {array.dtype}")
