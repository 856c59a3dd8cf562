"""`keras-caps compare --dataset multi_mnist`: two digits an image.

MultiMNIST (Sabour et al., 2017, Section 6) overlays two shifted digits of
different classes on 36 x 36. Every compared model reads two digits from
its two highest class scores: the capsule models (and the CNN ladder's
vector steps) from their two longest class capsules, as Sabour et al.
do, their decoder reconstructing each digit from the capsule of its own
class while training; the CNN baseline and the ladder's position step
from a sigmoid per class trained with the binary cross-entropy on the
two-hot targets (`keras_caps.applications.CNNBaseline`). Sabour et al.'s
baseline CNN (`sabour_cnn`) has no MultiMNIST preset and is refused.

The table's accuracy columns (clean and each corruption) are per-digit
accuracy: the share of the true digits among the two highest scores (1,
0.5 or 0 per image); the exact-match columns (`"exact_match:clean"`,
`"exact_match:noise:0.1"`, ...) the share of the images whose two digits
are both found, Sabour et al.'s criterion. Both are scored by
`keras_caps.evaluation.multi_digit_robustness` on the same seeded test
pairs and corruptions for every model, with the same statistics as the
other columns (means over seeds, 95 % intervals, paired tests against the
reference). McNemar's per-image test counts images on the exact-match
columns and digits on the per-digit ones (`predictions.npz` holds one
prediction per digit, two per image: the two digits of an image are not
independent, so read that test as indicative; the across-seed tests do
not depend on it).

The test set holds `partners_per_digit` pairs per MNIST test digit:
`compare` needs it (`--partners-per-digit`, e.g. 10 for 100,000 pairs),
and records it in `compare.json`; the models' test split during training
uses it too.
"""

from keras_caps.evaluation import multi_digit_robustness as multi_digit
from keras_caps.validation import check_positive_int

EXACT_MATCH_PREFIX = multi_digit.EXACT_MATCH_PREFIX


def comparison_settings(dataset, partners_per_digit, attacks=None):
    """`{"partners_per_digit": n}` of a MultiMNIST comparison's settings
    (checked); `{}` for other datasets, which refuse it.

    Raises:
        ValueError: `partners_per_digit` missing for MultiMNIST or given
            for another dataset; attacks asked for on MultiMNIST.
        TypeError: `partners_per_digit` not an integer.

    Example:

    >>> comparison_settings("multi_mnist", 10)
    {'partners_per_digit': 10}
    >>> comparison_settings("mnist", None)
    {}
    """
    if dataset not in multi_digit.MULTI_DIGIT_DATASETS:
        if partners_per_digit is not None:
            raise ValueError(
                "Received an invalid value for `partners_per_digit` "
                "(--partners-per-digit): it sizes the MultiMNIST test set, "
                f"and the comparison is on {dataset!r}. Drop it. Received: "
                f"partners_per_digit={partners_per_digit!r}")
        return {}
    if partners_per_digit is None:
        raise ValueError(
            "A comparison on MultiMNIST evaluates every model on every "
            "corrupted test pair held in memory: give `partners_per_digit` "
            "(--partners-per-digit, the pairs per MNIST test digit, e.g. "
            "10 for 100,000 pairs). Received: partners_per_digit=None")
    partners_per_digit = check_positive_int("partners_per_digit",
                                            partners_per_digit)
    multi_digit.check_multi_digit_evaluation(
        dataset, {"partners_per_digit": partners_per_digit}, attacks=attacks)
    return {"partners_per_digit": partners_per_digit}


def dataset_options(partners_per_digit):
    """The loader options of a comparison's models: `{"dataset_options":
    {"partners_per_digit": n}}` on MultiMNIST, else `{}` (the keyword
    argument of `TrainingSettings` and `evaluate_robustness`).

    Args:
        partners_per_digit: int or `None`. The comparison's
            (`ComparisonSettings.partners_per_digit`).

    Example:

    >>> dataset_options(10)
    {'dataset_options': {'partners_per_digit': 10}}
    >>> dataset_options(None)
    {}
    """
    if partners_per_digit is None:
        return {}
    return {"dataset_options": {"partners_per_digit": partners_per_digit}}


def exact_match_columns(partners_per_digit, columns):
    """The exact-match columns of a MultiMNIST comparison (one with
    `partners_per_digit`), one for each of its `(key, title)` accuracy
    `columns` (`[]` for other datasets).

    Example:

    >>> exact_match_columns(10,
    ...                     [("clean", "clean"), ("noise:0.1", "noise 0.1")])
    [('exact_match:clean', 'exact match clean'), \
('exact_match:noise:0.1', 'exact match noise 0.1')]
    """
    if partners_per_digit is None:
        return []
    return [(EXACT_MATCH_PREFIX + key, f"exact match {title}")
            for key, title in columns]


def is_exact_match(key):
    """Whether the column `key` holds exact-match accuracy."""
    return key.startswith(EXACT_MATCH_PREFIX)


def accuracy(evaluation, key):
    """The exact-match accuracy of the column `key` in a model's
    `robustness.json` record.

    Example:

    >>> accuracy({"exact_match": {"noise:0.1": 0.5}}, "exact_match:noise:0.1")
    0.5
    """
    return evaluation["exact_match"][key[len(EXACT_MATCH_PREFIX):]]


def clean_key(key):
    """The column a corruption column's relative error is measured
    against: `"exact_match:clean"` for the exact-match ones, else
    `"clean"`.

    Example:

    >>> clean_key("exact_match:noise:0.1"), clean_key("noise:0.1")
    ('exact_match:clean', 'clean')
    """
    return EXACT_MATCH_PREFIX + "clean" if is_exact_match(key) else "clean"


def per_image_correct(predictions, key, correct):
    """Which test units a model gets right under column `key`, for
    McNemar's test: `correct(predictions, key)` (one per saved
    prediction: a digit on MultiMNIST) for the other columns; for an
    exact-match column the images whose digits under its per-digit column
    are all right.

    Example:

    >>> import numpy as np
    >>> per_image_correct({}, "exact_match:clean",
    ...                   lambda _, key: np.array([1, 1, 0, 1], bool))
    array([ True, False])
    """
    if not is_exact_match(key):
        return correct(predictions, key)
    return multi_digit.exact_match_correct(
        correct(predictions, key[len(EXACT_MATCH_PREFIX):]))


def saved_key(key):
    """The key of `predictions.npz` that column `key`'s predictions are
    read from (an exact-match column's are its per-digit column's)."""
    return key[len(EXACT_MATCH_PREFIX):] if is_exact_match(key) else key


def notes(partners_per_digit, results):
    """The lines of `results.md` that say how MultiMNIST is scored (none
    for other datasets: `partners_per_digit` `None`)."""
    if partners_per_digit is None:
        return []
    pairs = results["models"][0]["evaluation"]["clean"]["num_images"]
    return [
        "", "MultiMNIST (Sabour et al. 2017, section 6): two overlapping "
        f"digits an image, {partners_per_digit} test pairs per "
        f"MNIST test digit ({pairs:,} pairs); each model reads the "
        "digits from its two highest class scores (capsule lengths, or a "
        "sigmoid per class trained with the binary cross-entropy for the "
        "CNN and the ladder's position step). `clean` and the corruption "
        "columns are per-digit accuracy (the share of the true digits "
        "among the two highest scores), `exact match` columns the share "
        "of the images with both digits found. Macro accuracy: the mean "
        "over classes of the share of their digits found. Collapse: the "
        "share of the images given the most frequent pair of predicted "
        "digits (about 1 / 45 for a working model). McNemar counts images "
        "on the exact-match columns, digits (two per image, not "
        "independent) on the others.",
    ]
