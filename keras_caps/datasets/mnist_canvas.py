"""MNIST digits on a 40 x 40 canvas: the affine-robustness training set.

Generated from the MNIST files, not affNIST: Sabour et al. (2017, Section
5.2) train on MNIST digits placed at random on a 40 x 40 black canvas,
with no other augmentation, and test on affinely transformed digits
(`keras_caps.evaluation.corruptions.affine_test_set` generates such a
test set from the MNIST test digits).

Reference:
- [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
"""

import functools

import tensorflow as tf

from keras_caps.datasets import crops
from keras_caps.datasets import holdout
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources

CANVAS_SIZE = 40
_DIGIT_SIZE = 28
_NUM_CLASSES = 10
# The digit's frame fits anywhere on the canvas: offsets 0..12.
_MARGIN = (CANVAS_SIZE - _DIGIT_SIZE) // 2


def load(split, *, batch_size, training=None, data_dir=None, seed=42,
         validation="holdout", reconstruction=True, shuffle_buffer_size=None,
         augment=True, download=True):
    """MNIST digits on a 40 x 40 black canvas (generated, not affNIST).

    Training batches place each 28 x 28 digit at a random integer position
    on the canvas (uniform over the 13 x 13 positions that keep the digit's
    frame inside, drawn anew every epoch); other splits centre it. No other
    augmentation. The splits, the holdout, the structure of the batches
    and the data files are those of `keras_caps.datasets.mnist.load`,
    with images `(batch, 40, 40, 1)` in raw pixels.

    Args:
        split: str. `"train"`, `"validation"` or `"test"`.
        batch_size: int. The global batch size.
        training: bool or `None`. Shuffle, place at random and drop the
            remainder. Defaults to `split == "train"`.
        data_dir: str or `None`. Folder of the MNIST IDX files.
        seed: int. Seeds the holdout, the shuffle and the placements.
        validation: str. `"holdout"` or `"test"`.
        reconstruction: bool. Yield reconstruction targets.
        shuffle_buffer_size: int or `None`. Defaults to the split size.
        augment: bool. Place the digits at random when training; `False`
            centres them. Defaults to `True`.
        download: bool. Without a data folder, let TFDS download MNIST if
            it is not prepared. Defaults to `True`.

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> ds = keras_caps.datasets.load(  # doctest: +SKIP
    ...     "mnist_canvas", "train", batch_size=16)
    >>> ds.element_spec[0]["image"].shape  # doctest: +SKIP
    TensorShape([16, 40, 40, 1])
    """
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    arrays = sources.load_image_arrays("mnist", data_dir, download)
    images, labels = holdout.select_split(arrays, split, validation, seed)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return pipeline.build_pipeline(
        dataset, prepare=_prepare,
        format_batch=functools.partial(pipeline.classification_batch,
                                       reconstruction=reconstruction),
        batch_size=batch_size, training=training, seed=seed,
        shuffle_buffer_size=shuffle_buffer_size or max(len(labels), 1),
        augment=_place_at_random if augment else None)


def _prepare(image, label):
    """The digit centred on the canvas, and its one-hot label."""
    image = tf.cast(tf.reshape(image, (_DIGIT_SIZE, _DIGIT_SIZE, 1)),
                    tf.float32)
    image = tf.pad(image, [[_MARGIN, _MARGIN], [_MARGIN, _MARGIN], [0, 0]])
    return image, tf.one_hot(label, _NUM_CLASSES, dtype=tf.float32)


def _place_at_random(batch, seed):
    # A 40 x 40 window of the centred canvas padded by the margin: window
    # offset o puts the digit's frame at 2 * margin - o, in [0, 12].
    images, labels = batch
    padded = tf.pad(images, [[0, 0], [_MARGIN, _MARGIN], [_MARGIN, _MARGIN],
                             [0, 0]])
    return crops.random_crop(padded, CANVAS_SIZE, seed), labels
