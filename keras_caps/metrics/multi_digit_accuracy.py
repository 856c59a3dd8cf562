"""Per-digit accuracy of multi-digit images: MultiDigitAccuracy."""

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_positive_int


@keras_caps_export("keras_caps.metrics.multi_digit_accuracy")
def multi_digit_accuracy(y_true, y_pred, num_digits=2):
    """Per-digit accuracy of multi-digit images (MultiMNIST).

    The official Efficient-CapsNet `multiAccuracy`: the share of the
    `num_digits` true classes found among the `num_digits` highest scores.

    ```
    accuracy = |top_k(y_pred) & top_k(y_true)| / k,   k = num_digits
    ```

    With two digits an image scores 1, 0.5 or 0.

    Args:
        y_true: Multi-hot targets of shape `(batch, num_classes)`, with
            `num_digits` ones (distinct classes).
        y_pred: Scores, e.g. capsule lengths, of shape
            `(batch, num_classes)`.
        num_digits: int. Digits per image, `k`. Defaults to `2`.

    Returns:
        float32 tensor of shape `(batch,)`.

    Example:

    >>> accuracy = keras_caps.metrics.multi_digit_accuracy(
    ...     np.array([[1.0, 1.0, 0.0]]), np.array([[0.9, 0.1, 0.8]]))
    >>> keras.ops.convert_to_numpy(accuracy).tolist()
    [0.5]
    """
    num_digits = check_positive_int("num_digits", num_digits)
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = ops.convert_to_tensor(y_true)
    matches = _top_k_mask(y_true, num_digits) * _top_k_mask(y_pred,
                                                             num_digits)
    return ops.sum(matches, axis=-1) / float(num_digits)


class _DigitAccuracy(keras.metrics.Accuracy):
    """Base of the multi-digit accuracies: the mean of `score_fn` per image.

    A subclass sets `score_fn`, a function `(y_true, y_pred, num_digits)`
    that returns one score per image. Deriving from `keras.metrics.Accuracy`
    marks the metric as one to maximise, so Keras callbacks in `mode="auto"`
    (`EarlyStopping`, `ModelCheckpoint`) know the direction.
    """

    score_fn = None

    def __init__(self, num_digits, name, dtype):
        num_digits = check_positive_int("num_digits", num_digits)
        super().__init__(name=name, dtype=dtype)
        self.num_digits = num_digits

    def update_state(self, y_true, y_pred, sample_weight=None):
        scores = self.score_fn(y_true, y_pred, num_digits=self.num_digits)
        return keras.metrics.Mean.update_state(self, scores,
                                               sample_weight=sample_weight)

    def get_config(self):
        return {"num_digits": self.num_digits, "name": self.name,
                "dtype": self.dtype}


@keras_caps_export("keras_caps.metrics.MultiDigitAccuracy")
class MultiDigitAccuracy(_DigitAccuracy):
    """Mean per-digit accuracy of multi-digit images (MultiMNIST).

    For each image, the share of its `num_digits` true classes that are
    among the `num_digits` highest predicted scores, averaged over images:
    the `multiAccuracy` of the official code of Mazzia et al. (2021), used
    for their MultiMNIST results. With two digits an image scores 1, 0.5
    or 0. Report it labelled "per-digit accuracy", next to the stricter
    `ExactMatchAccuracy`: the two are different protocols.

    ```
    accuracy = mean over images of |top_k(y_pred) & top_k(y_true)| / k
    ```

    Args:
        num_digits: int. Digits per image, `k`. Defaults to `2`.
        name: str. Defaults to `"multi_digit_accuracy"`.
        dtype: The dtype of the result. Defaults to `None` (float32).

    Example:

    >>> metric = keras_caps.metrics.MultiDigitAccuracy()
    >>> metric.update_state(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]),
    ...                     np.array([[0.9, 0.1, 0.8], [0.1, 0.7, 0.8]]))
    >>> float(metric.result())
    0.75

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """

    score_fn = staticmethod(multi_digit_accuracy)

    def __init__(self, num_digits=2, name="multi_digit_accuracy",
                 dtype=None):
        super().__init__(num_digits=num_digits, name=name, dtype=dtype)


def _top_k_mask(scores, k):
    """1.0 at the `k` highest scores of each row, 0.0 elsewhere."""
    num_classes = scores.shape[-1]
    _, indices = ops.top_k(scores, k=k)
    return ops.sum(ops.one_hot(indices, num_classes, dtype="float32"),
                   axis=-2)
