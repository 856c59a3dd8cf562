"""MultiMNIST, written once: what a split holds, the digit pool, and how a
pair of digits becomes an example.

The dataset of Sabour et al. 2017, "Dynamic Routing Between Capsules"
(Section 6.1): two MNIST digits of different classes, each zero-padded by
4 to 36 x 36 and shifted by integers uniform in `[-shift, shift]` per axis
(zero fill), overlaid as `clip(a + b, 0, 255)`. The defaults follow the
official code of Mazzia et al. 2021 (Efficient-CapsNet): 4 pixels of
padding and shifts of up to 6 pixels; training pairs are 10 per pool digit
and epoch.

Both pipelines build on this module: `multi_mnist` (`tf.data`, random
draws by stateless ops) and `multi_mnist_batches` (NumPy). The checks of
the options (`plan_split`), the pool (`DigitPool`: the digits sorted by
class, so "a digit of another class" is a position with one class's block
skipped), shifting (`shift_digits`) and merging a pair into an example
(`merge_pairs`, `format_batch`) are written against an executor
(`numpy_ops` or `tf_data_ops`); only the random streams differ.
"""

import dataclasses

import numpy as np

from keras_caps import model_roles as roles
from keras_caps.validation import check_non_negative_int
from keras_caps.validation import check_positive_int

NUM_CLASSES = 10
PAD = 4  # config.json: pad_multimnist
SIZE = 28 + 2 * PAD  # 36
PIXEL_MAX = 255.0
PAIRS_PER_DIGIT = 10  # the official 10x steps per epoch
# Salts that give the validation, test and training pairs streams of
# their own.
VALIDATION_SALT = 1
TEST_SALT = 2
TRAINING_SALT = 3


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """What one split of MultiMNIST yields.

    Attributes:
        training: bool. Fresh random pairs each epoch, or a fixed set.
        num_batches: int or `None`. Batches per epoch when training.
        partners: int. Partners of each pool digit in the fixed set (1 but
            for `"test"`).
        salt: int. The stream of the fixed set (`VALIDATION_SALT` or
            `TEST_SALT`).
    """

    training: bool
    num_batches: int | None
    partners: int
    salt: int


def check_options(shift, partners_per_digit, pairs_per_epoch):
    """Raises a `TypeError` or `ValueError` naming the option: a negative or
    non-integer `shift`, a `partners_per_digit` or `pairs_per_epoch` (when
    given) that is not a positive integer. Checked before any data is
    read."""
    check_non_negative_int("shift", shift)
    check_positive_int("partners_per_digit", partners_per_digit)
    if pairs_per_epoch is not None:
        check_positive_int("pairs_per_epoch", pairs_per_epoch)


def plan_split(split, *, training, pool, batch_size, partners_per_digit,
               pairs_per_epoch):
    """What `split` yields from `pool`, as a `SplitPlan` (the options
    checked by `check_options`).

    Raises a `ValueError` for fewer training pairs than a batch, or more
    test partners than some class's digits have digits of other classes.

    Example:

    >>> pool = DigitPool(np.arange(20) % 10)
    >>> plan_split("test", training=False, pool=pool, batch_size=4,
    ...            partners_per_digit=2, pairs_per_epoch=None)
    SplitPlan(training=False, num_batches=None, partners=2, salt=2)
    """
    if training:
        pairs = pairs_per_epoch or PAIRS_PER_DIGIT * pool.size
        if pairs // batch_size == 0:
            raise ValueError(
                "`pairs_per_epoch` must hold at least one batch. Received: "
                f"pairs_per_epoch={pairs}, batch_size={batch_size}")
        return SplitPlan(True, pairs // batch_size, 1, VALIDATION_SALT)
    partners = partners_per_digit if split == "test" else 1
    if partners > pool.min_partners:
        raise ValueError(
            "Received an invalid value for `partners_per_digit`: the "
            f"{split!r} digits of some class have only {pool.min_partners} "
            "digits of other classes to draw partners from without "
            f"replacement. Received: partners_per_digit={partners}")
    salt = TEST_SALT if split == "test" else VALIDATION_SALT
    return SplitPlan(False, None, partners, salt)


class DigitPool:
    """The labels pairs are drawn from, indexed through their stable sort
    by class.

    Args:
        labels: int array `(num_digits,)`, classes 0-9.

    Raises:
        ValueError: fewer than two classes have digits.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> pool = DigitPool(np.array([3, 1, 3, 2]))
    >>> pool.min_partners, pool.skip_class(np.array([0, 1]), 3, numpy_ops)
    (2, array([1, 3]))
    """

    def __init__(self, labels):
        self.labels = np.asarray(labels).astype(np.int64).reshape(-1)
        self.size = len(self.labels)
        self.counts = np.bincount(self.labels, minlength=NUM_CLASSES)
        if self.size == 0 or np.count_nonzero(self.counts) < 2:
            raise ValueError(
                "MultiMNIST needs digits of at least two classes. Received: "
                f"{self.size} digits with class counts "
                f"{self.counts.tolist()}")
        # The fewest digits of other classes any digit has.
        self.min_partners = int(self.size - self.counts.max())
        self.by_class = np.argsort(self.labels, kind="stable")
        self.starts = np.cumsum(self.counts) - self.counts

    def skip_class(self, positions, label, ops):
        """Digit indices of `positions` among the digits of classes other
        than `label` (per position)."""
        counts = ops.take(ops.constant(self.counts), label)
        skip = ops.where(positions >= ops.take(ops.constant(self.starts),
                                               label), counts, 0 * counts)
        return ops.take(ops.constant(self.by_class), positions + skip)


def shift_digits(digits, shifts, shift, ops):
    """Digits zero-padded to 36 x 36, each moved by `shifts[b] = (down,
    right)` pixels (zeros come in); `shift` is the largest shift.

    Args:
        digits: `(batch, 28, 28)` raw pixels.
        shifts: int `(batch, 2)`, in `[-shift, shift]`.
        shift: int.
        ops: the executor.

    Returns:
        float32 `(batch, 36, 36, 1)`.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> digit = np.zeros((1, 28, 28), np.uint8)
    >>> digit[0, 0, 0] = 255
    >>> out = shift_digits(digit, np.array([[2, -1]]), 6, numpy_ops)
    >>> out.shape, float(out[0, PAD + 2, PAD - 1, 0])
    ((1, 36, 36, 1), 255.0)
    """
    border = PAD + shift
    padded = ops.pad(ops.float32(digits),
                     [[0, 0], [border, border], [border, border]])
    # Output pixel p reads padded pixel p + shift - s: content moves by +s.
    positions = ops.arange(SIZE)[None, :] + shift
    rows = positions - ops.int32(shifts[:, :1])
    columns = positions - ops.int32(shifts[:, 1:])
    moved = ops.gather_columns(ops.gather_rows(padded[..., None], rows),
                               columns)
    return moved


def merge_pairs(first, second, first_labels, second_labels, ops):
    """`(merged, labels, digits)` of pairs of shifted digits.

    Args:
        first, second: float32 `(batch, 36, 36, 1)`, raw pixels.
        first_labels, second_labels: int `(batch,)`.
        ops: the executor.

    Returns:
        `merged`: float32 `(batch, 36, 36, 1)`, `clip(a + b, 0, 255)`;
        `labels`: float32 `(batch, 2, 10)`, the two one-hot labels in
        order; `digits`: float32 `(batch, 2, 36, 36, 1)`, both scaled to
        [0, 1].
    """
    eye = ops.constant(np.eye(NUM_CLASSES, dtype=np.float32))
    labels = ops.stack([ops.take(eye, first_labels),
                        ops.take(eye, second_labels)], axis=1)
    digits = ops.stack([first, second], axis=1)
    merged = ops.clip(first + second, 0.0, PIXEL_MAX)
    return merged, labels, digits / PIXEL_MAX


def format_batch(merged, labels, digits, reconstruction, ops):
    """A batch for `model.fit`: `({"image", "label"}, {"length",
    "reconstruction"})`, or `(merged, multi_hot)` without reconstruction;
    `multi_hot` is the sum of the two one-hot labels."""
    multi_hot = ops.reduce_sum(labels, axis=1)
    if not reconstruction:
        return merged, multi_hot
    return ({roles.IMAGE: merged, roles.LABEL: labels},
            {roles.LENGTH: multi_hot, roles.RECONSTRUCTION: digits})

