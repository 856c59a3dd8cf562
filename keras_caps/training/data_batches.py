"""The few operations the recipe needs on its batches, on any input path.

`keras_caps.datasets.load` yields a `tf.data.Dataset` on the TensorFlow
input path and a `keras.utils.PyDataset` (indexed batches) on the
TensorFlow-free one. The training recipe, `evaluate` and the figures need
only: how many batches one pass has, the first batch, every batch as
NumPy arrays, the batches after the first `n` (a resumed epoch), and the
batches repeated without end (a run with `steps_per_epoch`), and the first
`n` of them (the rest of such a run's epoch). These work on both, and never
import TensorFlow: a dataset can only be TensorFlow's when TensorFlow is
already imported.
"""

import sys

import keras
import numpy as np

from keras_caps.training.data_epoch import follows_epochs
from keras_caps.training.epoch_stream import EpochStream


def is_tf_dataset(data):
    """Whether `data` is a `tf.data.Dataset` (without importing TF)."""
    tensorflow = sys.modules.get("tensorflow")
    return tensorflow is not None and isinstance(data,
                                                 tensorflow.data.Dataset)


def batch_count(data):
    """The number of batches of one pass over `data`, or `None` when
    unknown or infinite.

    Example:

    ```python
    batch_count(datasets.load("mnist", "test", batch_size=100))  # 100
    ```
    """
    if is_tf_dataset(data):
        import tensorflow as tf

        count = int(tf.data.experimental.cardinality(data))
        return None if count < 0 else count
    if isinstance(data, keras.utils.PyDataset):
        return data.num_batches
    try:
        return len(data)
    except TypeError:
        return None


def first_batch(data):
    """The first batch of `data`, or `None` when it has none."""
    if isinstance(data, keras.utils.PyDataset):
        if data.num_batches == 0:
            return None
        return data[0]
    if is_tf_dataset(data):
        data = data.take(1)
    return next(iter(data), None)


def numpy_batches(data):
    """Every batch of one pass over `data`, as NumPy arrays."""
    if is_tf_dataset(data):
        yield from data.as_numpy_iterator()
        return
    for batch in data:
        yield keras.tree.map_structure(np.asarray, batch)


def skip_batches(data, count):
    """`data` without its first `count` batches (one pass)."""
    if count == 0:
        return data
    if is_tf_dataset(data):
        return data.skip(count)
    return BatchWindow(data, start=count)


def take_batches(data, count):
    """The first `count` batches of `data` (one pass, at most `count`)."""
    if is_tf_dataset(data):
        return data.take(count)
    return BatchWindow(data, count=count)


def repeat_batches(data):
    """`data`'s batches, pass after pass, without end."""
    if is_tf_dataset(data):
        return data.repeat()
    return BatchWindow(data, repeat=True)


def resumed_batches(data, epoch, steps_done, steps_per_epoch=None):
    """The training batches `fit` reads from step `steps_done` of epoch
    `epoch` on: endless under `steps_per_epoch` (Keras does not restart
    the data at each epoch then, so they must not run out), without the
    batches already done.

    Under `steps_per_epoch` an uninterrupted `fit` keeps one iterator
    across epochs, so its epoch `e` starts at step `e * steps_per_epoch`
    of the repeated data. Data whose batches follow the training epoch
    (`keras_caps.training.data_epoch.follows_epochs`) are read as an
    `EpochStream` entered at that step (whole passes: with `DataEpoch`
    among the callbacks), so a resumed epoch reads exactly the batches of
    an uninterrupted run. A `tf.data.Dataset` starts its first pass again
    (its shuffle order belongs to its iterator, which a new process
    cannot rebuild), so there a resumed epoch reads other batches.

    Example:

    ```python
    # Resumed after 3 steps of epoch 2, 10 steps per epoch.
    batches = resumed_batches(train, 2, 3, steps_per_epoch=10)
    ```
    """
    if steps_per_epoch is None:
        return skip_batches(data, steps_done)
    if follows_epochs(data):
        return EpochStream(data, steps_per_epoch,
                           start=epoch * steps_per_epoch + steps_done)
    return skip_batches(repeat_batches(data), steps_done)


def first_batch_shapes(data):
    """The structure of `data`'s batches with each array's shape (the
    element spec of a `tf.data.Dataset`, else the first batch's)."""
    if is_tf_dataset(data):
        return keras.tree.map_structure(lambda spec: tuple(spec.shape),
                                        data.element_spec)
    batch = first_batch(data)
    if batch is None:
        raise ValueError("Received an invalid value for `data`: it yields "
                         "no batch, expected at least one.")
    return keras.tree.map_structure(lambda array: tuple(np.shape(array)),
                                    batch)


class BatchWindow(keras.utils.PyDataset):
    """The batches of a `PyDataset` from `start` on, once or repeated, or
    the first `count` of them.

    Repeated, it has no end (`num_batches` is `None`): batch `i` is batch
    `(start + i) % len(data)` of `data`. With `count`, it ends after
    `count` batches (or `data`'s end, when sooner). It keeps `data`'s
    workers and passes the epoch callbacks on (where `data` reshuffles).

    Args:
        data: `keras.utils.PyDataset` (of known length, unless `count`).
        start: int. The first batch of `data` to yield.
        repeat: bool. Start again after the last batch, without end.
        count: int or `None`. At most this many batches.
    """

    def __init__(self, data, start=0, repeat=False, count=None):
        super().__init__(workers=data.workers,
                         use_multiprocessing=data.use_multiprocessing,
                         max_queue_size=data.max_queue_size)
        self.data, self.start, self.repeat = data, start, repeat
        self.count = count

    @property
    def num_batches(self):
        total = None  # Without end: repeated, or over data without end.
        if not self.repeat and self.data.num_batches is not None:
            total = max(self.data.num_batches - self.start, 0)
        if self.count is not None:
            return self.count if total is None else min(self.count, total)
        return total

    def __getitem__(self, index):
        total = self.num_batches
        if total is not None and index >= total:
            raise IndexError(f"Batch {index} is past the window's "
                             f"{total} batches.")
        position = self.start + index
        if self.repeat:
            position %= self.data.num_batches
        return self.data[position]

    def on_epoch_begin(self):
        self.data.on_epoch_begin()

    def on_epoch_end(self):
        self.data.on_epoch_end()
