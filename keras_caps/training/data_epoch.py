"""The training epoch, told to the data whose batches depend on it.

`keras_caps.datasets`' NumPy batches (`ImageBatches`, `MultiMNISTBatches`)
shuffle and draw their augmentation from their `epoch`, which their
`on_epoch_end` advances. Keras calls that hook once more than there are
epochs (each `fit` resets its data iterator before the first epoch, which
ends an epoch), and a resumed run's data start again at 0: counted that
way, the batches of an epoch would depend on how many `fit` calls led to
it. `DataEpoch` sets the data's `epoch` to the training epoch at each
epoch's start instead, so an epoch of whole passes reads the same batches
whether the run was interrupted or not. (Under `steps_per_epoch` the
recipe reads through `EpochStream`, which asks for each batch's epoch.)
"""

import keras


def follows_epochs(data):
    """Whether `data` is a `PyDataset` whose batches depend on its
    `epoch` attribute and which makes any epoch's batch with
    `batch_at(epoch, index)`."""
    return (isinstance(data, keras.utils.PyDataset)
            and hasattr(data, "epoch")
            and callable(getattr(data, "batch_at", None)))


def check_follows_epochs(data):
    """Raises `TypeError` unless `follows_epochs(data)`."""
    if not follows_epochs(data):
        raise TypeError(
            "`data` must be a `keras.utils.PyDataset` with an `epoch` "
            "attribute and a `batch_at(epoch, index)` method. "
            f"Received: data={type(data).__name__}")


class DataEpoch(keras.callbacks.Callback):
    """Sets `data.epoch` to the training epoch at each epoch's start.

    Keras calls the callbacks' `on_epoch_begin` before it makes the
    epoch's data iterator, so, when every epoch is one whole pass over
    `data`, every batch of training epoch `e` (from 0) is read with
    `data.epoch == e`.

    Args:
        data: `keras.utils.PyDataset` with an `epoch` attribute and a
            `batch_at` method (see `follows_epochs`).

    Example:

    ```python
    batches = ImageBatches(images, labels, batch_size=32, num_classes=10,
                           training=True, seed=0)
    model.fit(batches, epochs=3, callbacks=[DataEpoch(batches)])
    ```
    """

    def __init__(self, data):
        super().__init__()
        check_follows_epochs(data)
        self.data = data

    def on_epoch_begin(self, epoch, logs=None):
        self.data.epoch = epoch
