"""`EpochStream`: the batches of a `steps_per_epoch` run, by training step."""

import keras

from keras_caps.training.data_epoch import check_follows_epochs


class EpochStream(keras.utils.PyDataset):
    """The endless batches a run of `steps_per_epoch` steps per epoch
    trains on, from training step `start` on.

    Under `steps_per_epoch` Keras keeps one data iterator across epochs,
    so training step `g` (counted over the whole run) reads batch
    `g % len(data)` of the repeated data, and its epoch is
    `g // steps_per_epoch`. `EpochStream` makes each batch from its step
    alone (`data.batch_at(epoch, index)`), never from `data`'s `epoch`
    attribute: batches read ahead of an epoch's start (TensorFlow's
    prefetch, JAX's device look-ahead) get their own epoch, and a run
    resumed at step `start` reads the batches an uninterrupted one does.

    Args:
        data: `keras.utils.PyDataset` of known length with an `epoch`
            attribute and a `batch_at(epoch, index)` method (see
            `keras_caps.training.data_epoch.follows_epochs`).
        steps_per_epoch: int. Training steps per epoch.
        start: int. The run's training step of the first batch.

    Example:

    ```python
    # Resumed after 3 steps of epoch 2, 10 steps per epoch.
    batches = EpochStream(train, steps_per_epoch=10, start=2 * 10 + 3)
    ```
    """

    def __init__(self, data, steps_per_epoch, start=0):
        check_follows_epochs(data)
        super().__init__(workers=data.workers,
                         use_multiprocessing=data.use_multiprocessing,
                         max_queue_size=data.max_queue_size)
        self.data = data
        self.steps_per_epoch = int(steps_per_epoch)
        self.start = int(start)

    @property
    def num_batches(self):
        return None  # Without end.

    def __getitem__(self, index):
        step = self.start + index
        return self.data.batch_at(step // self.steps_per_epoch,
                                  step % self.data.num_batches)
