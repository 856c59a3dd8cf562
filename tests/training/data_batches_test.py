"""The recipe's batch operations agree on `tf.data` and `PyDataset` input:
counted, first, skipped, repeated and taken batches, checked by batch
index."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_caps.training.data_batches import batch_count
from keras_caps.training.data_batches import first_batch
from keras_caps.training.data_batches import first_batch_shapes
from keras_caps.training.data_batches import numpy_batches
from keras_caps.training.data_batches import repeat_batches
from keras_caps.training.data_batches import skip_batches
from keras_caps.training.data_batches import take_batches


class _Numbered(keras.utils.PyDataset):
    """Batch `i` is `(x, y)` with every `x` equal to `i`; remembers the
    indices read, in order, and the epoch ends it was told of."""

    def __init__(self, batches, **kwargs):
        super().__init__(**kwargs)
        self.batches, self.read, self.epoch_ends = batches, [], 0

    def __len__(self):
        return self.batches

    def __getitem__(self, index):
        if not 0 <= index < self.batches:
            raise IndexError(index)
        self.read.append(index)
        x = np.full((2, 3), index, "float32")
        return x, np.zeros((2, 4), "float32")

    def on_epoch_end(self):
        self.epoch_ends += 1


def _tf_numbered(batches):
    return tf.data.Dataset.range(batches).map(
        lambda i: (tf.fill((2, 3), tf.cast(i, "float32")),
                   tf.zeros((2, 4))))


def _indices(data, limit=None):
    """The batch index of each batch (its `x` value), at most `limit`."""
    found = []
    for x, _ in numpy_batches(data):
        found.append(int(x[0, 0]))
        if limit is not None and len(found) == limit:
            break
    return found


def _has_run(values, run):
    """Whether `run` occurs in `values` as consecutive items."""
    return any(values[start:start + len(run)] == run
               for start in range(len(values) - len(run) + 1))


@pytest.mark.single_backend
@pytest.mark.parametrize("make", [_Numbered, _tf_numbered],
                         ids=["py_dataset", "tf_data"])
def test_count_first_skip_and_repeat_by_index(make):
    data = make(5)
    assert batch_count(data) == 5
    x, y = first_batch(data)
    np.testing.assert_array_equal(np.asarray(x), np.zeros((2, 3)))
    assert first_batch_shapes(data)[1][-1] == 4
    assert _indices(data) == [0, 1, 2, 3, 4]
    skipped = skip_batches(data, 2)
    assert batch_count(skipped) == 3
    assert _indices(skipped) == [2, 3, 4]
    assert skip_batches(data, 0) is data
    # Without end: 5 batches, then the first ones again.
    repeated = repeat_batches(data)
    assert batch_count(repeated) is None
    assert _indices(repeated, limit=12) == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert _indices(repeat_batches(skip_batches(data, 3)), limit=5) == [
        3, 4, 3, 4, 3]
    # The first few of them: the rest of an epoch under `steps_per_epoch`.
    taken = take_batches(skip_batches(repeated, 3), 4)
    assert batch_count(taken) == 4
    assert _indices(taken) == [3, 4, 0, 1]
    assert _indices(take_batches(data, 9)) == [0, 1, 2, 3, 4]


@pytest.mark.single_backend
def test_empty_py_dataset_has_no_first_batch():
    assert first_batch(_Numbered(0)) is None
    with pytest.raises(ValueError, match="yields no batch"):
        first_batch_shapes(_Numbered(0))


@pytest.mark.single_backend
def test_fit_reads_repeated_batches_across_epochs_in_order():
    # The recipe under `steps_per_epoch`: 3 steps per epoch over 5 batches,
    # the data continuing across epochs (as `tf.data`'s `repeat` does),
    # and each epoch's end passed on to the data (where it reshuffles).
    data = _Numbered(5)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(repeat_batches(data), epochs=3, steps_per_epoch=3,
              shuffle=False, verbose=0)
    # Keras may read the first batches once more before training, to learn
    # their structure, and read ahead (TensorFlow does both): the training
    # reads are a run of the indices read.
    assert _has_run(data.read, [0, 1, 2, 3, 4, 0, 1, 2, 3])
    assert not _has_run(data.read, [0, 1, 2, 0])  # No restart per epoch.
    assert data.epoch_ends >= 3  # Keras also calls it before the first.
    assert int(model.optimizer.iterations) == 9
    # A resumed epoch: the 2 batches left after 3 of 5 were done.
    data.read.clear()
    model.fit(skip_batches(data, 3), epochs=1, shuffle=False, verbose=0)
    assert _has_run(data.read, [3, 4])
    assert set(data.read) == {3, 4}
