import math

import keras
import numpy as np
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_number


def _check_margin(margin):
    margin = check_number("margin", margin, minimum=0.0)
    if not math.isfinite(margin):
        raise ValueError(
            "Received an invalid value for `margin`, expected a finite "
            f"number of at least 0. Received: margin={margin!r}")
    return margin


def _static_shape(tensor):
    return tuple(None if dim is None else int(dim) for dim in tensor.shape)


def _known_values(tensor):
    """The values of `tensor` as NumPy, or None while it is traced."""
    try:
        return ops.convert_to_numpy(tensor)
    except (NotImplementedError, TypeError):
        return None


def _one_hot_targets(y_true, y_pred):
    """One-hot targets `(batch, classes)` and a mask of valid rows or None.

    `y_true` is one-hot `(batch, classes)` or class ids `(batch,)` /
    `(batch, 1)`, told apart by shape alone. Known ids outside
    `[0, classes)` raise; traced ones give a mask (their rows turn NaN).
    """
    true_shape, pred_shape = _static_shape(y_true), _static_shape(y_pred)
    if len(pred_shape) != 2 or pred_shape[-1] is None:
        raise ValueError(
            "Received an invalid value for `y_pred` of the spread loss, "
            "expected class activations of shape `(batch, num_classes)` "
            f"with a known number of classes. Received: "
            f"y_pred.shape={pred_shape}")
    num_classes = pred_shape[-1]
    if true_shape == pred_shape or (
            len(true_shape) == 2 and true_shape[-1] == num_classes
            and num_classes != 1):
        return ops.cast(y_true, y_pred.dtype), None
    if len(true_shape) == 2 and true_shape[-1] == 1:
        y_true = ops.squeeze(y_true, axis=-1)
    elif len(true_shape) != 1:
        raise ValueError(
            "Received an invalid value for `y_true` of the spread loss, "
            "expected one-hot targets of the shape of `y_pred` "
            f"{pred_shape} or class ids of shape `(batch,)` or "
            f"`(batch, 1)`. Received: y_true.shape={true_shape}")
    values = _known_values(y_true)
    if values is None:
        valid = ops.logical_and(
            ops.logical_and(ops.greater_equal(y_true, 0),
                            ops.less(y_true, num_classes)),
            ops.equal(y_true, ops.floor(y_true)))
    else:
        values = np.asarray(values, dtype="float64")
        bad = ~((values >= 0) & (values < num_classes)
                & (values == np.floor(values)))
        if bad.any():
            raise ValueError(
                "Received an invalid value for `y_true` of the spread "
                f"loss, expected whole class ids in [0, {num_classes}). "
                f"Received: y_true={values[bad][0]:g} at index "
                f"{int(np.flatnonzero(bad)[0])}")
        valid = None
    targets = ops.one_hot(ops.cast(y_true, "int32"), num_classes,
                          dtype=y_pred.dtype)
    return targets, valid


@keras_caps_export("keras_caps.losses.spread_loss")
def spread_loss(y_true, y_pred, margin=0.2):
    """Spread loss of matrix capsules, summed over the wrong classes.

    ```
    loss = sum_{i != t} max(0, m - (a_t - a_i))**2
    ```

    for the activation `a_t` of the target class `t` and the activations
    `a_i` of the other classes (Hinton, Sabour & Frosst, 2018, §3.1). Each
    wrong class closer than `m` to the target costs the square of the
    shortfall; with `m = 1` and activations in `[0, 1]` it is the squared
    Hinge loss.

    Args:
        y_true: One-hot targets `(batch, num_classes)` or integer class ids
            `(batch,)` or `(batch, 1)`, told apart by shape only. Known ids
            outside `[0, num_classes)` raise a `ValueError`; traced ones
            (inside a compiled `fit`) make their rows' loss NaN.
        y_pred: Class activations `(batch, num_classes)`.
        margin: float or scalar tensor. `m`, at least 0. Defaults to `0.2`,
            the paper's starting margin.

    Returns:
        Tensor of shape `(batch,)`, in the dtype of `y_pred`.

    Example:

    >>> loss = keras_caps.losses.spread_loss(
    ...     np.array([1]), np.array([[0.5, 0.6, 0.1]]), margin=0.2)
    >>> round(float(loss[0]), 4)  # (0.2 - 0.1)**2 + 0
    0.01

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    """
    if not keras.ops.is_tensor(margin):
        margin = _check_margin(margin)
    y_pred = ops.convert_to_tensor(y_pred)
    targets, valid = _one_hot_targets(ops.convert_to_tensor(y_true), y_pred)
    margin = ops.cast(margin, y_pred.dtype)
    # (batch, 1): the target's activation, then each class's shortfall.
    target_activation = ops.sum(targets * y_pred, axis=-1, keepdims=True)
    shortfall = ops.relu(margin - (target_activation - y_pred))
    loss = ops.sum((1.0 - targets) * ops.square(shortfall), axis=-1)
    if valid is not None:
        loss = ops.where(valid, loss, ops.full_like(loss, float("nan")))
    return loss


@keras_caps_export("keras_caps.losses.SpreadLoss")
class SpreadLoss(keras.losses.Loss):
    """Spread loss of matrix capsules, see `keras_caps.losses.spread_loss`.

    The margin is held in a non-trainable float32 variable, so
    `loss.margin = 0.5` (or `keras_caps.callbacks.SpreadLossMarginSchedule`,
    which raises it from 0.2 to 0.9 over training as the paper does)
    takes effect in a compiled training step without retracing it on
    TensorFlow and PyTorch. On JAX a compiled step reads the variable as a
    constant, so the schedule callback rebuilds the step when the margin
    changes (once per epoch). The loss is computed in the loss dtype
    (float32 by default) under mixed precision.

    Args:
        margin: float. The starting margin `m`, at least 0. Defaults to
            `0.2`, the paper's.
        reduction: Keras loss reduction. Defaults to
            `"sum_over_batch_size"`.
        name: str. Defaults to `"spread_loss"`.
        dtype: The loss dtype. Defaults to `None` (float32).

    Example:

    >>> loss = keras_caps.losses.SpreadLoss(margin=0.2)
    >>> round(float(loss(np.array([1]), np.array([[0.5, 0.6, 0.1]]))), 4)
    0.01
    >>> loss.margin = 0.9  # (0.9 - 0.1)**2 + (0.9 - 0.5)**2
    >>> round(float(loss(np.array([1]), np.array([[0.5, 0.6, 0.1]]))), 4)
    0.8

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    """

    def __init__(self, margin=0.2, reduction="sum_over_batch_size",
                 name="spread_loss", dtype=None):
        margin = _check_margin(margin)
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self._margin = keras.Variable(margin, trainable=False,
                                      dtype="float32", name="margin")

    @property
    def margin(self):
        """float. The current margin `m`."""
        return float(ops.convert_to_numpy(self._margin))

    @margin.setter
    def margin(self, value):
        self._margin.assign(_check_margin(value))

    def call(self, y_true, y_pred):
        return spread_loss(y_true, y_pred, margin=self._margin.value)

    def get_config(self):
        config = super().get_config()
        config.update({"margin": self.margin, "dtype": self.dtype})
        return config
