import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_number


def _check_margins(positive_margin, negative_margin, negative_weight):
    positive_margin = check_number("positive_margin", positive_margin,
                                   minimum=0.0)
    negative_margin = check_number("negative_margin", negative_margin,
                                   minimum=0.0, maximum=positive_margin)
    negative_weight = check_number("negative_weight", negative_weight,
                                   minimum=0.0)
    return positive_margin, negative_margin, negative_weight


@keras_caps_export("keras_caps.losses.margin_loss")
def margin_loss(y_true, y_pred, positive_margin=0.9, negative_margin=0.1,
                negative_weight=0.5):
    """Margin loss of capsule networks, summed over classes.

    ```
    loss = sum_k T_k * max(0, m_plus - |v_k|)**2
               + lambda * (1 - T_k) * max(0, |v_k| - m_minus)**2
    ```

    Args:
        y_true: One-hot or multi-hot targets `T` of shape
            `(batch, num_classes)`.
        y_pred: Capsule lengths `|v|` of shape `(batch, num_classes)`.
        positive_margin: float. `m_plus`. Defaults to `0.9`.
        negative_margin: float. `m_minus`. Defaults to `0.1`.
        negative_weight: float. `lambda`, the down-weighting of absent
            classes. Defaults to `0.5`.

    Returns:
        Tensor of shape `(batch,)`, in the dtype of `y_pred`.

    Example:

    >>> loss = keras_caps.losses.margin_loss(
    ...     np.array([[0.0, 1.0]]), np.array([[0.2, 0.7]]))
    >>> round(float(loss[0]), 4)
    0.045

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """
    positive_margin, negative_margin, negative_weight = _check_margins(
        positive_margin, negative_margin, negative_weight)
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = ops.cast(y_true, y_pred.dtype)
    present = ops.square(ops.relu(positive_margin - y_pred))
    absent = ops.square(ops.relu(y_pred - negative_margin))
    per_class = y_true * present + negative_weight * (1.0 - y_true) * absent
    return ops.sum(per_class, axis=-1)


@keras_caps_export("keras_caps.losses.MarginLoss")
class MarginLoss(keras.losses.Loss):
    """Margin loss of capsule networks, see `keras_caps.losses.margin_loss`.

    The per-example loss is summed over classes and, with the default
    reduction, averaged over the batch, as in the official code. The loss is
    computed in the loss dtype (float32 by default), so it stays safe under
    mixed precision.

    Args:
        positive_margin: float. `m_plus`. Defaults to `0.9`.
        negative_margin: float. `m_minus`. Defaults to `0.1`.
        negative_weight: float. `lambda`. Defaults to `0.5`.
        reduction: Keras loss reduction. Defaults to
            `"sum_over_batch_size"`.
        name: str. Defaults to `"margin_loss"`.
        dtype: The loss dtype. Defaults to `None` (float32 under every
            mixed-precision policy).

    Example:

    >>> loss = keras_caps.losses.MarginLoss()
    >>> round(float(loss(np.array([[0.0, 1.0]]), np.array([[0.2, 0.7]]))), 4)
    0.045

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    def __init__(self, positive_margin=0.9, negative_margin=0.1,
                 negative_weight=0.5, reduction="sum_over_batch_size",
                 name="margin_loss", dtype=None):
        positive_margin, negative_margin, negative_weight = _check_margins(
            positive_margin, negative_margin, negative_weight)
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.positive_margin = positive_margin
        self.negative_margin = negative_margin
        self.negative_weight = negative_weight

    def call(self, y_true, y_pred):
        return margin_loss(y_true, y_pred,
                           positive_margin=self.positive_margin,
                           negative_margin=self.negative_margin,
                           negative_weight=self.negative_weight)

    def get_config(self):
        config = super().get_config()
        config.update({
            "positive_margin": self.positive_margin,
            "negative_margin": self.negative_margin,
            "negative_weight": self.negative_weight,
            "dtype": self.dtype,
        })
        return config
