"""Exact-match accuracy of multi-digit images: ExactMatchAccuracy."""

from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.metrics.multi_digit_accuracy import _DigitAccuracy
from keras_caps.metrics.multi_digit_accuracy import multi_digit_accuracy


@keras_caps_export("keras_caps.metrics.exact_match_accuracy")
def exact_match_accuracy(y_true, y_pred, num_digits=2):
    """Whether all digits of a multi-digit image are found (MultiMNIST).

    1 when the `num_digits` highest scores are exactly the true classes,
    else 0: Sabour et al.'s MultiMNIST criterion (both digits in the top 2).

    Args:
        y_true: Multi-hot targets of shape `(batch, num_classes)`, with
            `num_digits` ones (distinct classes).
        y_pred: Scores, e.g. capsule lengths, of shape
            `(batch, num_classes)`.
        num_digits: int. Digits per image. Defaults to `2`.

    Returns:
        float32 tensor of shape `(batch,)` of ones and zeros.

    Example:

    >>> accuracy = keras_caps.metrics.exact_match_accuracy(
    ...     np.array([[1.0, 1.0, 0.0]]), np.array([[0.9, 0.8, 0.1]]))
    >>> keras.ops.convert_to_numpy(accuracy).tolist()
    [1.0]
    """
    # All digits found is a per-digit accuracy of exactly 1.
    per_digit = multi_digit_accuracy(y_true, y_pred, num_digits=num_digits)
    return ops.cast(per_digit >= 1.0, "float32")


@keras_caps_export("keras_caps.metrics.ExactMatchAccuracy")
class ExactMatchAccuracy(_DigitAccuracy):
    """Share of multi-digit images whose digits are all in the top scores.

    An image counts as correct only when its `num_digits` true classes are
    exactly its `num_digits` highest predicted scores (for MultiMNIST: both
    digits in the top 2), the criterion of Sabour et al. (2017, Section 6:
    an image is classified correctly when both digits are in the two
    most active digit capsules). Report it labelled "exact-match
    accuracy", next to the per-digit `MultiDigitAccuracy`; it is never
    higher.

    Args:
        num_digits: int. Digits per image. Defaults to `2`.
        name: str. Defaults to `"exact_match_accuracy"`.
        dtype: The dtype of the result. Defaults to `None` (float32).

    Example:

    >>> metric = keras_caps.metrics.ExactMatchAccuracy()
    >>> metric.update_state(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]),
    ...                     np.array([[0.9, 0.1, 0.8], [0.1, 0.7, 0.8]]))
    >>> float(metric.result())
    0.5

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    score_fn = staticmethod(exact_match_accuracy)

    def __init__(self, num_digits=2, name="exact_match_accuracy",
                 dtype=None):
        super().__init__(num_digits=num_digits, name=name, dtype=dtype)

