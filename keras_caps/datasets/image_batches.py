"""`ImageBatches`: the loaders' batches as a `keras.utils.PyDataset`."""

import keras
import numpy as np

from keras_caps.datasets import numpy_ops
from keras_caps.datasets.batch_format import classification_batch

# Tags that keep the shuffle's and the augmentation's random streams apart.
_SHUFFLE_STREAM = 1
_AUGMENT_STREAM = 2


class ImageBatches(keras.utils.PyDataset):
    """Batches of in-memory images in the format of `keras_caps.datasets.load`.

    The TensorFlow-free twin of the loaders' `tf.data` pipeline
    (`keras_caps.datasets.pipeline`), for every Keras backend. With
    `reconstruction=True` a batch is `({"image": image, "label": label},
    {"length": label, "reconstruction": target})`, otherwise
    `(image, label)`: images float32 `(batch, height, width, channels)` in
    raw pixels, labels one-hot float32 `(batch, num_classes)`, targets the
    (augmented) images / 255 clipped to [0, 1].

    When `training`, the examples are permuted anew every epoch (the
    `epoch` attribute, which `on_epoch_end` advances; `batch_at(epoch,
    index)` makes any epoch's batch, so the training recipe can read the
    batches of the training epoch it is in, and a resumed run the batches
    an uninterrupted one would), the last partial batch is dropped and
    `augment` is applied to each batch.
    Otherwise batches follow the stored order and keep the remainder.

    Everything is a function of `seed`: the permutation of epoch `e` comes
    from a `numpy.random.Generator` seeded with `(seed, e)`, the
    augmentation of batch `i` of epoch `e` from one seeded with
    `(seed, e, i)`. So a batch does not depend on which worker makes it,
    nor on how many there are (`workers`, `use_multiprocessing`).

    Args:
        images: uint8 or float array `(num_examples, height, width)` or
            `(num_examples, height, width, channels)`, raw pixels.
        labels: int array `(num_examples,)` of class indices.
        batch_size: int.
        num_classes: int. Depth of the one-hot labels.
        training: bool. Shuffle, augment, and drop the last partial batch.
        seed: int. Seeds the shuffle and the augmentation.
        reconstruction: bool. Yield the dict structure with reconstruction
            targets. Defaults to `True`.
        augment: `None` or a function `(images, rng) -> images` of a
            float32 batch and a `numpy.random.Generator`, applied when
            training (e.g.
            `keras_caps.datasets.numpy_augmentation.augment_mnist`).
            It must be picklable for `use_multiprocessing`.
        workers: int. Threads (or processes) that make batches. Defaults
            to `1`.
        use_multiprocessing: bool. Processes instead of threads. Defaults
            to `False`.
        max_queue_size: int. Batches made ahead. Defaults to `10`.

    Example:

    >>> images = np.zeros((10, 28, 28), "uint8")
    >>> batches = ImageBatches(images, np.arange(10), batch_size=4,
    ...                        num_classes=10, training=True, seed=0)
    >>> len(batches), batches[0][0]["image"].shape
    (2, (4, 28, 28, 1))
    """

    def __init__(self, images, labels, *, batch_size, num_classes, training,
                 seed, reconstruction=True, augment=None, workers=1,
                 use_multiprocessing=False, max_queue_size=10):
        super().__init__(workers=workers,
                         use_multiprocessing=use_multiprocessing,
                         max_queue_size=max_queue_size)
        images = np.asarray(images)
        if images.ndim == 3:
            images = images[..., None]
        self._images = images
        self._labels = np.asarray(labels).astype(np.int64).reshape(-1)
        self._num_classes = int(num_classes)
        self._batch_size = int(batch_size)
        self._training = bool(training)
        # SeedSequence takes non-negative integers only.
        self._seed = int(seed) % 2**64
        self._reconstruction = bool(reconstruction)
        self._augment = augment
        self.epoch = 0
        self._order = (None, None)  # (epoch, permutation)

    @property
    def num_examples(self):
        """int. The examples of the split, before batching."""
        return len(self._labels)

    def __len__(self):
        if self._training:
            return self.num_examples // self._batch_size
        return -(-self.num_examples // self._batch_size)

    def on_epoch_end(self):
        self.epoch += 1

    def _permutation(self, epoch):
        cached_epoch, order = self._order
        if cached_epoch != epoch:
            rng = np.random.default_rng([self._seed, _SHUFFLE_STREAM, epoch])
            order = rng.permutation(self.num_examples)
            self._order = (epoch, order)
        return order

    def __getitem__(self, index):
        return self.batch_at(self.epoch, index)

    def batch_at(self, epoch, index):
        """Batch `index` of epoch `epoch` (whatever `self.epoch` is)."""
        if not 0 <= index < len(self):
            raise IndexError(
                f"Batch index {index} out of range for {len(self)} batches.")
        chosen = slice(index * self._batch_size,
                       (index + 1) * self._batch_size)
        if self._training:
            chosen = self._permutation(epoch)[chosen]
        images = self._images[chosen].astype(np.float32)
        labels = np.eye(self._num_classes, dtype=np.float32)[
            self._labels[chosen]]
        if self._training and self._augment is not None:
            rng = np.random.default_rng(
                [self._seed, _AUGMENT_STREAM, epoch, index])
            images = np.asarray(self._augment(images, rng), np.float32)
        return classification_batch(images, labels, self._reconstruction,
                                    numpy_ops)
