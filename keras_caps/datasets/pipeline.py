"""The shared `tf.data` chain of every loader.

```
map(prepare, AUTOTUNE) -> cache() -> shuffle (training only, reshuffled
every epoch) -> batch(global batch size) -> augment (training only,
vectorised over the batch) -> map(format) -> prefetch(AUTOTUNE)
```

Random augmentation comes after `cache()`, so every epoch draws anew. The
augmentations are vectorised, so they run once per batch after `batch()`.
Their randomness comes from stateless ops whose seeds are drawn per batch
from `tf.data.Dataset.random(seed, rerandomize_each_iteration=True)`: every
epoch sees new augmentations, and the whole sequence is a function of
`seed`.

TensorFlow is imported inside the functions that build `tf.data` chains,
so that `check_arguments` serves the TensorFlow-free loaders too.
"""

import numbers

from keras_caps.datasets import batch_format
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

SPLITS = ("train", "validation", "test")
VALIDATION_PROTOCOLS = ("holdout", "test")


def check_arguments(split, batch_size, training, validation, seed,
                    shuffle_buffer_size):
    """Validates the arguments every loader shares.

    Returns:
        `training`, resolved: `split == "train"` when `None`.
    """
    check_choice("split", split, SPLITS)
    check_positive_int("batch_size", batch_size)
    check_choice("validation", validation, VALIDATION_PROTOCOLS)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            "Received an invalid type for `seed`, expected an integer. "
            f"Received: seed={seed!r} of type {type(seed).__name__}")
    if shuffle_buffer_size is not None:
        check_positive_int("shuffle_buffer_size", shuffle_buffer_size)
    if training is None:
        return split == "train"
    if not isinstance(training, bool):
        raise TypeError(
            "Received an invalid type for `training`, expected a bool or "
            f"None. Received: training={training!r}")
    return training


def build_pipeline(dataset, *, prepare, format_batch, batch_size, training,
                   seed, shuffle_buffer_size, augment=None):
    """Runs single examples through the shared chain.

    Args:
        dataset: `tf.data.Dataset` of raw single examples.
        prepare: Deterministic per-example function, mapped before
            `cache()`.
        format_batch: Function of a batch, mapped last; it builds the
            `(inputs, targets)` structure the model sees.
        batch_size: int. The global batch size.
        training: bool. Shuffle (buffer `shuffle_buffer_size`, reshuffled
            every epoch), augment, and drop the last partial batch.
        seed: int. Seeds the shuffle and the augmentations.
        shuffle_buffer_size: int. The shuffle buffer, used when training.
        augment: `None` or a function `(batch, seed) -> batch` of a batch
            and a stateless seed (int64 tensor of shape `(2,)`), applied
            when training.

    Returns:
        A `tf.data.Dataset` of batches of exactly `batch_size` when
        training (the last partial batch is dropped) and of at most
        `batch_size` otherwise.
    """
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    dataset = dataset.map(prepare, num_parallel_calls=autotune)
    dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed,
                                  reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=training,
                            num_parallel_calls=autotune)
    if training and augment is not None:
        dataset = tf.data.Dataset.zip(dataset, batch_seeds(seed))
        dataset = dataset.map(augment, num_parallel_calls=autotune)
    dataset = dataset.map(format_batch, num_parallel_calls=autotune)
    return dataset.prefetch(autotune)


def batch_seeds(seed):
    """An endless stream of stateless seeds, new in every epoch.

    Args:
        seed: int.

    Returns:
        `tf.data.Dataset` of int64 tensors of shape `(2,)`, suitable as the
        `seed` of `tf.random.stateless_*` ops. Each new iteration (epoch)
        yields a different stream; the sequence of streams depends only on
        `seed`.
    """
    import tensorflow as tf

    # A seed of its own, so the stream is not the shuffle's.
    stream = tf.data.Dataset.random(seed=seed + 7919,
                                    rerandomize_each_iteration=True)
    return stream.batch(2, drop_remainder=True)


def classification_batch(images, labels, reconstruction):
    """`batch_format.classification_batch` on the `tf.data` executor: the
    `(inputs, targets)` of a single-label batch of tensors."""
    from keras_caps.datasets import tf_data_ops

    return batch_format.classification_batch(images, labels, reconstruction,
                                             tf_data_ops)
