"""`MultiMnistBatches`: MultiMNIST pairs made with NumPy, as a `PyDataset`."""

import keras
import numpy as np

from keras_caps import model_roles as roles
from keras_caps.datasets import numpy_augmentation

_NUM_CLASSES = 10
_PAD = 4  # the official pad_multimnist
_SIZE = 28 + 2 * _PAD  # 36
_PIXEL_MAX = 255.0
# Salts that give the streams of pairs their own seeds, as in multi_mnist.
_VALIDATION_SALT = 1
_TEST_SALT = 2
_TRAINING_SALT = 3


class MultiMnistBatches(keras.utils.PyDataset):
    """MultiMNIST batches (Sabour et al. 2017, §6) made with NumPy alone.

    The TensorFlow-free twin of `keras_caps.datasets.multi_mnist.load`,
    with the same batches in structure and distribution (its docstring
    describes them): two digits of different classes, each zero-padded by
    4 to 36 x 36 and translated by integer shifts uniform in
    `[-shift, shift]` per axis, merged as `clip(a + b, 0, 255)`. With
    `reconstruction=True` a batch is `({"image": merged, "label": labels},
    {"length": multi_hot, "reconstruction": digits})`, otherwise
    `(merged, multi_hot)`.

    When `training`, each epoch holds `num_batches` batches of fresh random
    pairs (first digit uniform over the pool, second uniform over the
    digits of other classes); batch `i` of epoch `e` comes from a
    `numpy.random.Generator` seeded with `(seed, e, i)`, so workers do not
    change it. Otherwise the pairs are a fixed set: for each pool digit (the
    base, shifted once) `partners` partners of other classes drawn without
    replacement, each shifted on its own, base by base, all a function of
    `(seed, salt, base)`. The random streams are NumPy's, not TensorFlow's.

    Args:
        images: uint8 array `(num_digits, 28, 28)`.
        labels: int array `(num_digits,)`.
        batch_size: int.
        training: bool. Random pairs, or the fixed set.
        seed: int.
        shift: int. Largest shift per axis.
        num_batches: int. Batches per epoch when training.
        partners: int. Partners per base digit when not training.
        salt: int. Tells the fixed sets of different splits apart.
        reconstruction: bool. Defaults to `True`.
        workers, use_multiprocessing, max_queue_size: As in
            `keras.utils.PyDataset`.

    Example:

    >>> images = np.zeros((20, 28, 28), "uint8")
    >>> batches = MultiMnistBatches(
    ...     images, np.arange(20) % 10, batch_size=4, training=False,
    ...     seed=0, shift=6, num_batches=None, partners=2, salt=2)
    >>> len(batches), batches[0][1]["reconstruction"].shape
    (10, (4, 2, 36, 36, 1))
    """

    def __init__(self, images, labels, *, batch_size, training, seed, shift,
                 num_batches, partners, salt, reconstruction=True,
                 workers=1, use_multiprocessing=False, max_queue_size=10):
        super().__init__(workers=workers,
                         use_multiprocessing=use_multiprocessing,
                         max_queue_size=max_queue_size)
        self._labels = np.asarray(labels).astype(np.int64).reshape(-1)
        counts = np.bincount(self._labels, minlength=_NUM_CLASSES)
        if len(self._labels) == 0 or np.count_nonzero(counts) < 2:
            raise ValueError(
                "MultiMNIST needs digits of at least two classes. Received: "
                f"{len(self._labels)} digits with class counts "
                f"{counts.tolist()}")
        self.min_partners = int(len(self._labels) - counts.max())
        # The digits zero-padded to 36 x 36 once: (n, 36, 36).
        self._padded = np.pad(np.asarray(images, np.uint8),
                              ((0, 0), (_PAD, _PAD), (_PAD, _PAD)))
        self._by_class = np.argsort(self._labels, kind="stable")
        self._counts = counts
        self._starts = np.cumsum(counts) - counts
        self._batch_size = int(batch_size)
        self._training = bool(training)
        self._seed = int(seed) % 2**64
        self._shift = int(shift)
        self._num_batches = num_batches
        self._partners = partners
        self._salt = salt
        self._reconstruction = bool(reconstruction)
        self.epoch = 0

    def __len__(self):
        if self._training:
            return self._num_batches
        return -(-len(self._labels) * self._partners // self._batch_size)

    def on_epoch_end(self):
        self.epoch += 1

    def __getitem__(self, index):
        return self.batch_at(self.epoch, index)

    def batch_at(self, epoch, index):
        """Batch `index` of epoch `epoch` (whatever `self.epoch` is)."""
        if not 0 <= index < len(self):
            raise IndexError(
                f"Batch index {index} out of range for {len(self)} batches.")
        if self._training:
            first, second, shifts = self._random_pairs(epoch, index)
        else:
            first, second, shifts = self._fixed_pairs(index)
        return self._merge(first, second, shifts)

    def _random_pairs(self, epoch, index):
        rng = np.random.default_rng(
            [self._seed, _TRAINING_SALT, epoch, index])
        size = self._batch_size
        first = rng.integers(0, len(self._labels), size)
        label = self._labels[first]
        num_others = len(self._labels) - self._counts[label]
        positions = np.minimum(np.floor(rng.random(size) * num_others),
                               num_others - 1).astype(np.int64)
        shifts = self._draw_shifts(rng, (size, 2, 2))
        return first, self._skip_class(positions, label), shifts

    def _fixed_pairs(self, index):
        stop = min((index + 1) * self._batch_size,
                   len(self._labels) * self._partners)
        pairs = np.arange(index * self._batch_size, stop)
        bases, ranks = np.divmod(pairs, self._partners)
        second = np.empty(len(pairs), np.int64)
        shifts = np.empty((len(pairs), 2, 2), np.int64)
        for base in np.unique(bases):
            chosen = bases == base
            partners, base_shift, partner_shifts = self._partners_of(base)
            second[chosen] = partners[ranks[chosen]]
            shifts[chosen, 0] = base_shift
            shifts[chosen, 1] = partner_shifts[ranks[chosen]]
        return bases, second, shifts

    def _partners_of(self, base):
        """The partners of a base digit, its shift and theirs."""
        rng = np.random.default_rng([self._seed, self._salt, int(base)])
        label = self._labels[base]
        num_others = len(self._labels) - self._counts[label]
        # A uniform draw without replacement, in random order.
        positions = rng.choice(num_others, self._partners, replace=False)
        base_shift = self._draw_shifts(rng, (2,))
        partner_shifts = self._draw_shifts(rng, (self._partners, 2))
        return (self._skip_class(positions, np.full_like(positions, label)),
                base_shift, partner_shifts)

    def _draw_shifts(self, rng, shape):
        return rng.integers(-self._shift, self._shift + 1, shape)

    def _skip_class(self, positions, label):
        """Digit indices of positions among the digits of other classes."""
        skip = np.where(positions >= self._starts[label],
                        self._counts[label], 0)
        return self._by_class[positions + skip]

    def _merge(self, first, second, shifts):
        digits = np.stack([
            numpy_augmentation.shift_with_zero_fill(
                self._padded[indices][..., None], shifts[:, slot])
            for slot, indices in enumerate((first, second))], axis=1)
        digits = digits.astype(np.float32)  # (b, 2, 36, 36, 1)
        merged = np.clip(digits.sum(axis=1), 0.0, _PIXEL_MAX)
        eye = np.eye(_NUM_CLASSES, dtype=np.float32)
        labels = np.stack([eye[self._labels[first]],
                           eye[self._labels[second]]], axis=1)
        multi_hot = labels.sum(axis=1)
        if not self._reconstruction:
            return merged, multi_hot
        return ({roles.IMAGE: merged, roles.LABEL: labels},
                {roles.LENGTH: multi_hot,
                 roles.RECONSTRUCTION: digits / np.float32(_PIXEL_MAX)})
