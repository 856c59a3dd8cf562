"""`MultiMnistBatches`: MultiMNIST pairs made with NumPy, as a `PyDataset`."""

import keras
import numpy as np

from keras_caps.datasets import multi_mnist_pairs as pairs
from keras_caps.datasets import numpy_ops


class MultiMnistBatches(keras.utils.PyDataset):
    """MultiMNIST batches (Sabour et al. 2017, §6) made with NumPy alone.

    The NumPy executor of `multi_mnist_pairs` (what `multi_mnist.load`, its
    `tf.data` counterpart, yields too: its docstring describes the
    batches): two digits of different classes, each zero-padded by
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
        self._pool = pairs.DigitPool(labels)
        self.min_partners = self._pool.min_partners
        self._digits = np.asarray(images, np.uint8)  # (n, 28, 28)
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
        return -(-self._pool.size * self._partners // self._batch_size)

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
        labels = self._pool.labels
        merged = pairs.merge_pairs(
            *[pairs.shift_digits(self._digits[indices], shifts[:, slot],
                                 self._shift, numpy_ops)
              for slot, indices in enumerate((first, second))],
            labels[first], labels[second], numpy_ops)
        return pairs.format_batch(*merged, self._reconstruction, numpy_ops)

    def _random_pairs(self, epoch, index):
        rng = np.random.default_rng(
            [self._seed, pairs.TRAINING_SALT, epoch, index])
        size = self._batch_size
        first = rng.integers(0, self._pool.size, size)
        label = self._pool.labels[first]
        num_others = self._pool.size - self._pool.counts[label]
        positions = np.minimum(np.floor(rng.random(size) * num_others),
                               num_others - 1).astype(np.int64)
        shifts = self._draw_shifts(rng, (size, 2, 2))
        return first, self._pool.skip_class(positions, label,
                                            numpy_ops), shifts

    def _fixed_pairs(self, index):
        stop = min((index + 1) * self._batch_size,
                   self._pool.size * self._partners)
        indices = np.arange(index * self._batch_size, stop)
        bases, ranks = np.divmod(indices, self._partners)
        second = np.empty(len(indices), np.int64)
        shifts = np.empty((len(indices), 2, 2), np.int64)
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
        label = self._pool.labels[base]
        num_others = self._pool.size - self._pool.counts[label]
        # A uniform draw without replacement, in random order.
        positions = rng.choice(num_others, self._partners, replace=False)
        base_shift = self._draw_shifts(rng, (2,))
        partner_shifts = self._draw_shifts(rng, (self._partners, 2))
        return (self._pool.skip_class(
            positions, np.full_like(positions, label), numpy_ops),
            base_shift, partner_shifts)

    def _draw_shifts(self, rng, shape):
        return rng.integers(-self._shift, self._shift + 1, shape)
