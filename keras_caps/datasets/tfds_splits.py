"""The train, validation and test splits of a prepared TFDS dataset.

The `tf.data` counterpart of `holdout.select_split`, for the datasets read
as TFDS examples rather than NumPy arrays (CIFAR, smallNORB): the labels
are read once without decoding the images, the holdout is drawn from them,
and the examples are filtered by position.
"""

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps.datasets import holdout
from keras_caps.datasets import prepared_folders
from keras_caps.datasets import sources

_LABEL_BATCH = 65536


def load_split(name, split, *, validation, seed, data_dir, download=True,
               label_key="label", image_keys=("image",), **kwargs):
    """The examples of one split under a validation protocol, and their number.

    With `validation="holdout"`, `"train"` is the TFDS training split minus
    a seeded, class-stratified holdout of 10 % (see
    `holdout.holdout_indices`) and `"validation"` is that holdout. With
    `validation="test"`, `"train"` is the whole training split and
    `"validation"` is the test split. `"test"` is always the test split.

    Args:
        name: str. The TFDS dataset name.
        split: str. `"train"`, `"validation"` or `"test"`.
        validation: str. `"holdout"` or `"test"`.
        seed: int. The seed of the holdout draw.
        data_dir: str or `None`. TFDS data directory.
        download: bool. Download and prepare the dataset when it is not
            prepared (see `sources.load_tfds`). Defaults to `True`.
        label_key: str. The feature the holdout is stratified by. Defaults
            to `"label"`.
        image_keys: tuple of str. The image features, left undecoded while
            the labels are read. Defaults to `("image",)`.
        **kwargs: Other `tfds.load` arguments for the examples, e.g.
            `as_supervised`.

    Returns:
        Tuple `(examples, num_examples)`: a `tf.data.Dataset` of single
        examples, in stored order, and its length.
    """
    use_test = split == "test" or (split == "validation"
                                   and validation == "test")
    tfds_split = "test" if use_test else "train"
    examples = sources.load_tfds(name, tfds_split, data_dir, download,
                                 **kwargs)

    def labels_of(tfds_split):
        return _labels(name, tfds_split, data_dir, download, label_key,
                       image_keys)

    if use_test or validation == "test":
        num_examples = int(examples.cardinality())
        if num_examples < 0:
            num_examples = len(labels_of(tfds_split))
        return examples, num_examples
    train, held = holdout.holdout_indices(labels_of("train"), seed)
    chosen = train if split == "train" else held
    return _select_examples(examples, chosen, len(train) + len(held))


def _labels(name, tfds_split, data_dir, download, label_key, image_keys):
    """All labels of a split, in stored order, without decoding images."""
    skip = tfds.decode.SkipDecoding()
    examples = sources.load_tfds(
        name, tfds_split, data_dir, download,
        decoders={key: skip for key in image_keys})

    def label(example):
        return example[label_key]

    def concat(total, batch):
        return tf.concat([total, batch], axis=0)

    with prepared_folders.read_errors_named(name, tfds_split, data_dir,
                                            download):
        labels = examples.map(label).batch(_LABEL_BATCH).reduce(
            tf.zeros((0,), tf.int64), concat)
    return labels.numpy()


def _select_examples(examples, indices, num_examples):
    """The examples at `indices` of a dataset of `num_examples`, in order.

    Filters by position, without decoding the examples that are dropped,
    and keeps a known cardinality.

    Returns:
        `(dataset, len(indices))`.
    """
    keep = np.zeros(num_examples, dtype=bool)
    keep[indices] = True
    keep = tf.constant(keep)

    def is_kept(index, example):
        del example
        return tf.gather(keep, index)

    def drop_index(index, example):
        del index
        return example

    examples = examples.enumerate().filter(is_kept).map(drop_index)
    examples = examples.apply(
        tf.data.experimental.assert_cardinality(len(indices)))
    return examples, len(indices)


def read_labels(name, tfds_split, *, data_dir, download=True,
                label_key="label", image_keys=("image",)):
    """One label feature of every example of a TFDS split, in stored order.

    The images are left undecoded, so this reads little more than the
    labels.

    Args:
        name: str. The TFDS dataset name.
        tfds_split: str. `"train"` or `"test"`.
        data_dir: str or `None`. TFDS data directory.
        download: bool. Download and prepare the dataset when it is not
            prepared. Defaults to `True`.
        label_key: str. The feature to read. Defaults to `"label"`.
        image_keys: tuple of str. The image features, left undecoded.

    Returns:
        int64 NumPy array `(num_examples,)`.
    """
    return _labels(name, tfds_split, data_dir, download, label_key,
                   image_keys)


def select_examples(examples, indices, num_examples):
    """The examples at the sorted `indices` of a dataset of `num_examples`
    single examples, in stored order, with a known cardinality; the
    dropped examples are not decoded.

    Returns:
        `(dataset, len(indices))`.
    """
    return _select_examples(examples, indices, num_examples)
