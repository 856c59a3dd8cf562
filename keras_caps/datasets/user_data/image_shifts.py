"""Random shifts of training images, the augmentation of user datasets.

The augmentations of the built-in datasets are those of their papers
(MNIST's rotations and squishes, CIFAR's crops and flips) and fit those
images only. A user's images get one simple, general augmentation: a
random translation by up to `MAX_SHIFT_FRACTION` (10 %) of the image size,
with zero fill.
"""

import tensorflow as tf

from keras_caps.datasets import crops

MAX_SHIFT_FRACTION = 0.1


def random_image_shift(images, seed, max_fraction=MAX_SHIFT_FRACTION):
    """Shifts each image by a random whole number of pixels, zero fill.

    The shift along each axis is drawn per image, uniformly in
    `[-m, m]` with `m = max(1, round(max_fraction * size))` (size: the
    height for rows, the width for columns), by stateless ops.

    Args:
        images: float32 tensor `(batch, height, width, channels)`, with
            static height and width.
        seed: int64 tensor `(2,)`, the stateless seed.
        max_fraction: float. Defaults to `MAX_SHIFT_FRACTION` (0.1).

    Returns:
        float32 tensor of the same shape.

    Example:

    >>> images = tf.ones((2, 20, 10, 1))
    >>> random_image_shift(images, tf.constant([1, 2], "int64")).shape
    TensorShape([2, 20, 10, 1])
    """
    height, width = int(images.shape[1]), int(images.shape[2])
    max_rows = max(1, round(max_fraction * height))
    max_columns = max(1, round(max_fraction * width))
    padded = tf.pad(images, [[0, 0], [max_rows, max_rows],
                             [max_columns, max_columns], [0, 0]])
    batch = tf.shape(images)[0]
    row_seed, column_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=2))
    rows = tf.random.stateless_uniform(
        [batch, 1], row_seed, 0, 2 * max_rows + 1, dtype=tf.int32)
    columns = tf.random.stateless_uniform(
        [batch, 1], column_seed, 0, 2 * max_columns + 1, dtype=tf.int32)
    # A window at offset o of the padded image moves the content by
    # max - o pixels.
    return crops.crop(padded, tf.concat([rows, columns], axis=1),
                      (height, width))
