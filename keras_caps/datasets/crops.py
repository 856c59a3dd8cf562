"""Per-image crops of a batch, as one gather per axis.

`tf.image.crop_to_bounding_box` takes one offset for the whole batch; the
loaders need a different window in every image (random crops, random
shifts), drawn by stateless ops. A window is a gather of rows then columns
with `batch_dims=1`, so a batch costs two ops whatever its size.
"""

import tensorflow as tf


def crop(images, offsets, size):
    """Cuts a `size` window out of each image at its own offset.

    ```
    crop(images, offsets, size)[b, i, j] =
        images[b, offsets[b, 0] + i, offsets[b, 1] + j]
    ```

    Args:
        images: tensor of shape `(batch, height, width, ...)`.
        offsets: int32 tensor of shape `(batch, 2)`: the (row, column) of
            each window's top-left corner. Every window must lie inside
            its image.
        size: int (square windows) or `(height, width)`.

    Returns:
        Tensor of shape `(batch, height, width, ...)` and the dtype of
        `images`.

    Example:

    >>> images = tf.reshape(tf.range(2 * 4 * 4), (2, 4, 4))
    >>> crop(images, tf.constant([[0, 0], [2, 1]]), size=2).numpy()[1]
    array([[25, 26],
           [29, 30]], dtype=int32)
    """
    height, width = (size, size) if isinstance(size, int) else size
    images = tf.gather(images, offsets[:, :1] + tf.range(height)[None, :],
                       axis=1, batch_dims=1)
    return tf.gather(images, offsets[:, 1:] + tf.range(width)[None, :],
                     axis=2, batch_dims=1)


def random_crop(images, size, seed):
    """Cuts a `size` x `size` window out of each image at a random place.

    The (row, column) offset of each window is drawn per image, uniformly
    among the integers that keep the window inside the image, by a
    stateless op: a batch and a seed fix the result.

    Args:
        images: tensor of shape `(batch, height, width, ...)`, square
            (`height == width`), at least `size` pixels on a side.
        size: int. Height and width of the windows.
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.

    Returns:
        Tensor of shape `(batch, size, size, ...)` and the dtype of
        `images`.

    Example:

    >>> images = tf.zeros((3, 40, 40, 3))
    >>> random_crop(images, size=32, seed=(1, 2)).shape
    TensorShape([3, 32, 32, 3])
    """
    shape = tf.shape(images)
    offsets = tf.random.stateless_uniform(
        [shape[0], 2], seed, minval=0, maxval=shape[1] - size + 1,
        dtype=tf.int32)
    return crop(images, offsets, size)
