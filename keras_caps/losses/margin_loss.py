import keras
import numpy as np
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


def _shape(tensor):
    return tuple(None if dim is None else int(dim) for dim in tensor.shape)


def _compatible(left, right):
    return all(a is None or b is None or a == b for a, b in zip(left, right))


def _dense_targets(y_true, y_pred):
    """`y_true` as dense targets of the shape and dtype of `y_pred`.

    Returns the targets and, for traced class ids, a boolean mask of the
    valid ids (None otherwise; concrete invalid ids raise a `ValueError`).

    Sparse labels are recognized by rank alone, never by value: a `y_true`
    of one rank less than `y_pred`, or with a last dimension of 1 where
    `y_pred` has more than one class, holds integer class ids and is one-hot
    encoded. Any other `y_true` must have the shape of `y_pred`.
    """
    true_shape, pred_shape = _shape(y_true), _shape(y_pred)

    def mismatch(reason):
        return ValueError(
            f"`y_true` and `y_pred` of the margin loss have incompatible "
            f"shapes: {reason}. `y_true` must be one-hot or multi-hot "
            f"targets of the shape of `y_pred`, `(batch, num_classes)`, or "
            f"integer class ids of shape `(batch,)` or `(batch, 1)`. "
            f"Received: y_true.shape={true_shape}, "
            f"y_pred.shape={pred_shape}")

    if not pred_shape:
        raise mismatch("`y_pred` must have a class axis")
    num_classes = pred_shape[-1]
    sparse = len(true_shape) == len(pred_shape) - 1 or (
        len(true_shape) == len(pred_shape) and true_shape[-1] == 1
        and num_classes != 1)
    if not sparse:
        if len(true_shape) != len(pred_shape):
            raise mismatch("`y_true` must have the rank of `y_pred` or one "
                           "less")
        if not _compatible(true_shape, pred_shape):
            raise mismatch("dense targets must have the shape of `y_pred`")
        return ops.cast(y_true, y_pred.dtype), None
    if len(true_shape) == len(pred_shape):
        y_true = ops.squeeze(y_true, axis=-1)
    if not _compatible(true_shape, pred_shape[:-1]):
        raise mismatch("the class ids and `y_pred` have different batch "
                       "dimensions")
    if num_classes is None:
        raise mismatch("integer class ids need a known number of classes, "
                       "the last dimension of `y_pred`")
    # `keras.losses.Loss` converts `y_true` to the loss dtype (float32)
    # before `call`; the class ids are exact in it up to 2**24.
    valid = _valid_class_ids(y_true, num_classes)
    class_ids = ops.cast(y_true, "int32")
    targets = ops.one_hot(class_ids, num_classes, dtype=y_pred.dtype)
    return targets, valid


def _concrete_values(tensor):
    """The values of `tensor` as a NumPy array, or None while tracing.

    Inside `tf.function` or `jax.jit` the values are not known, and a
    data-dependent Python error is impossible (JAX) or would break the
    graph. Asking Keras for the values tells the two cases apart on every
    backend: a symbolic tensor refuses the conversion (TensorFlow raises
    `NotImplementedError`, a JAX tracer a `TypeError`). Under
    `torch.compile` the conversion is a graph break, not an error.
    """
    if isinstance(tensor, np.ndarray):
        return tensor
    try:
        return ops.convert_to_numpy(tensor)
    except (NotImplementedError, TypeError):
        return None


def _valid_class_ids(class_ids, num_classes):
    """Checks the class ids; a mask of the valid ones while tracing.

    Concrete ids outside `[0, num_classes)` or not whole numbers raise a
    `ValueError` and None is returned when all are valid; traced ids give a
    boolean mask of shape `(batch,)` for `margin_loss` to turn the loss of
    the other rows into NaN.
    """
    values = _concrete_values(class_ids)
    if values is None:
        in_range = ops.logical_and(ops.greater_equal(class_ids, 0),
                                   ops.less(class_ids, num_classes))
        whole = ops.equal(class_ids, ops.floor(class_ids))
        return ops.logical_and(in_range, whole)
    values = np.asarray(values)
    bad = ~((values >= 0) & (values < num_classes)
            & (values == np.floor(values)))
    if bad.any():
        first = values[bad].ravel()[0]
        first = int(first) if float(first).is_integer() else float(first)
        raise ValueError(
            f"`y_true` of the margin loss holds integer class ids, which "
            f"must be whole numbers in [0, {num_classes}) for "
            f"{num_classes} classes (the last dimension of `y_pred`); "
            f"{int(bad.sum())} of {values.size} are not. Received: "
            f"y_true={first} at index {int(np.flatnonzero(bad)[0])}")
    return None


@keras_caps_export("keras_caps.losses.margin_loss")
def margin_loss(y_true, y_pred, positive_margin=0.9, negative_margin=0.1,
                negative_weight=0.5):
    """Margin loss of capsule networks, summed over classes.

    ```
    loss = sum_k T_k * max(0, m_plus - |v_k|)**2
               + lambda * (1 - T_k) * max(0, |v_k| - m_minus)**2
    ```

    Args:
        y_true: The targets `T`: one-hot or multi-hot targets of shape
            `(batch, num_classes)` (e.g. two digits present in MultiMNIST),
            or integer class ids of shape `(batch,)` or `(batch, 1)`, as
            for `keras.losses.SparseCategoricalCrossentropy`, which are
            one-hot encoded to the `num_classes` of `y_pred`. Sparse labels
            are told apart by their shape only (rank one less than
            `y_pred`, or a last dimension of 1 while `y_pred` has more than
            one class), so one-hot targets with `batch == num_classes` stay
            one-hot. Class ids must be whole numbers in
            `[0, num_classes)`: other ids raise a `ValueError` when their
            values are known (eager calls, NumPy inputs), and give a NaN
            loss for their rows inside a traced function (`tf.function`,
            `jax.jit`, a compiled `fit`), so that training visibly fails
            instead of learning "no class" for them.
        y_pred: Capsule lengths `|v|` of shape `(batch, num_classes)`.
        positive_margin: float. `m_plus`. Defaults to `0.9`.
        negative_margin: float. `m_minus`. Defaults to `0.1`.
        negative_weight: float. `lambda`, the down-weighting of absent
            classes. Defaults to `0.5`.

    Returns:
        Tensor of shape `(batch,)`, in the dtype of `y_pred`.

    Raises:
        ValueError: if the shapes of `y_true` and `y_pred` match neither
            form (checked on the static shapes), or if concrete class ids
            lie outside `[0, num_classes)`.

    Example:

    >>> loss = keras_caps.losses.margin_loss(
    ...     np.array([[0.0, 1.0]]), np.array([[0.2, 0.7]]))
    >>> round(float(loss[0]), 4)
    0.045
    >>> loss = keras_caps.losses.margin_loss(
    ...     np.array([1]), np.array([[0.2, 0.7]]))
    >>> round(float(loss[0]), 4)
    0.045

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """
    positive_margin, negative_margin, negative_weight = _check_margins(
        positive_margin, negative_margin, negative_weight)
    y_pred = ops.convert_to_tensor(y_pred)
    y_true, valid = _dense_targets(ops.convert_to_tensor(y_true), y_pred)
    present = ops.square(ops.relu(positive_margin - y_pred))
    absent = ops.square(ops.relu(y_pred - negative_margin))
    per_class = y_true * present + negative_weight * (1.0 - y_true) * absent
    loss = ops.sum(per_class, axis=-1)
    if valid is not None:
        loss = ops.where(valid, loss, ops.full_like(loss, float("nan")))
    return loss


@keras_caps_export("keras_caps.losses.MarginLoss")
class MarginLoss(keras.losses.Loss):
    """Margin loss of capsule networks, see `keras_caps.losses.margin_loss`.

    The per-example loss is summed over classes and, with the default
    reduction, averaged over the batch, as in the official code. The loss is
    computed in the loss dtype (float32 by default), so it stays safe under
    mixed precision.

    `y_true` may be one-hot or multi-hot targets of the shape of `y_pred`,
    or integer class ids of shape `(batch,)` or `(batch, 1)`, as
    `keras.losses.SparseCategoricalCrossentropy` takes them; see
    `keras_caps.losses.margin_loss`. Class ids outside `[0, num_classes)`
    raise a `ValueError` in eager calls and give NaN losses in a compiled
    `fit` (the batch's mean loss turns NaN).

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
