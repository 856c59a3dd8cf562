"""`DataEpoch` and `resumed_batches`: a resumed `fit` reads exactly the
batches (epoch and index) that an uninterrupted one reads, with and
without `steps_per_epoch`; the hook Keras calls once more than there are
epochs does not shift them."""

import keras
import numpy as np
import pytest

from keras_caps.training.data_batches import resumed_batches
from keras_caps.training.data_epoch import DataEpoch
from keras_caps.training.data_epoch import follows_epochs
from keras_caps.training.epoch_stream import EpochStream


class _EpochTagged(keras.utils.PyDataset):
    """Batch `i` of epoch `e` has every `x` equal to `100 * e + i` (its
    tag); `on_epoch_end` advances `epoch` as the datasets' batches do."""

    def __init__(self, batches):
        super().__init__()
        self.batches, self.epoch = batches, 0

    def __len__(self):
        return self.batches

    def __getitem__(self, index):
        return self.batch_at(self.epoch, index)

    def on_epoch_end(self):
        self.epoch += 1

    def batch_at(self, epoch, index):
        if not 0 <= index < self.batches:
            raise IndexError(index)
        tag = 100 * epoch + index
        return np.full((2, 3), tag, "float32"), np.zeros((2, 1), "float32")


def _fit_tags(data, epoch, done, epochs, steps_per_epoch):
    """The tags of the batches `fit` trained on, from `(epoch, done)`."""
    model = keras.Sequential([keras.Input((3,)), _TagRecorder()])
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    steps = None if steps_per_epoch is None else steps_per_epoch - done
    model.fit(resumed_batches(data, epoch, done, steps_per_epoch),
              initial_epoch=epoch, epochs=epochs, steps_per_epoch=steps,
              callbacks=[DataEpoch(data)], shuffle=False, verbose=0)
    return model.layers[0].tags


class _TagRecorder(keras.layers.Layer):
    """Passes a sum through and records the first value of each training
    batch (the batch's tag); eager, so it sees real values."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def build(self, input_shape):
        self.w = self.add_weight(shape=(3, 1), initializer="zeros")

    def call(self, x, training=False):
        if training:
            self.tags.append(int(keras.ops.convert_to_numpy(x)[0, 0]))
        return keras.ops.matmul(x, self.w)


@pytest.mark.single_backend
@pytest.mark.parametrize("steps_per_epoch", [None, 3])
def test_a_resumed_fit_trains_on_the_uninterrupted_batches(steps_per_epoch):
    # 5 batches; 3 epochs, whole passes or 3 steps each (the data then
    # continue across epochs: epoch 1 reads batches 3, 4, 0).
    uninterrupted = _fit_tags(_EpochTagged(5), 0, 0, 3, steps_per_epoch)
    if steps_per_epoch is None:
        assert uninterrupted == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104,
                                 200, 201, 202, 203, 204]
    else:
        assert uninterrupted == [0, 1, 2, 103, 104, 100, 201, 202, 203]
    # Killed after 1 step of epoch 1: that epoch's rest, then epoch 2, in
    # a new process (new data object, its epoch counter at 0).
    data = _EpochTagged(5)
    resumed = _fit_tags(data, 1, 1, 2, steps_per_epoch)
    steps = steps_per_epoch or 5
    resumed += _fit_tags(data, 2, 0, 3, steps_per_epoch)
    assert resumed == uninterrupted[steps + 1:]


def test_data_without_an_epoch_is_refused():
    assert follows_epochs(_EpochTagged(2))
    assert not follows_epochs([(np.zeros(1), np.zeros(1))])
    with pytest.raises(TypeError, match="`data` must be a"):
        DataEpoch(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="Received: data=list"):
        EpochStream([(np.zeros(1), np.zeros(1))], steps_per_epoch=2)


def test_the_stream_makes_each_batch_from_its_step():
    # 5 batches, 3 steps per epoch, from step 4 (epoch 1, step 1).
    stream = EpochStream(_EpochTagged(5), steps_per_epoch=3, start=4)
    assert stream.num_batches is None
    tags = [int(stream[i][0][0, 0]) for i in range(6)]
    assert tags == [104, 100, 201, 202, 203, 304]
