"""The `tf.data` executor: the array operations and random draws of the
datasets' shared steps (`augmentation_steps`, `multi_mnist_pairs`) in
TensorFlow, so a step runs inside a `tf.data` pipeline's graph.

The same interface as `numpy_ops` (the NumPy executor); random draws come
from stateless ops, one seed per draw.

Example:

>>> from keras_caps.datasets import augmentation_steps, tf_data_ops
>>> draws = augmentation_steps.draw_parameters(
...     2, tf_data_ops.StatelessRandom(
...         tf.random.experimental.stateless_split((1, 2), num=5)),
...     tf_data_ops)
>>> images = tf.zeros((2, 28, 28, 1))
>>> tuple(augmentation_steps.apply_parameters(
...     images, draws, tf_data_ops).shape)
(2, 28, 28, 1)
"""

import tensorflow as tf


class StatelessRandom:
    """Stateless random draws, the i-th draw from `seeds[i]`.

    Args:
        seeds: int64 tensor `(num_draws, 2)` (or a list of `(2,)` seeds),
            one stateless seed per draw, in the order the draws are made.
    """

    def __init__(self, seeds):
        self.seeds = seeds
        self.used = 0

    def _next_seed(self):
        seed = self.seeds[self.used]
        self.used += 1
        return seed

    def normal(self, shape, stddev):
        """float32 draws of N(0, stddev^2)."""
        return tf.random.stateless_normal(shape, self._next_seed(),
                                          stddev=stddev)

    def uniform(self, shape):
        """float32 draws uniform in [0, 1)."""
        return tf.random.stateless_uniform(shape, self._next_seed())


def float32(x):
    return tf.cast(x, tf.float32)


def int32(x):
    return tf.cast(x, tf.int32)


def constant(x):
    return tf.constant(x)


def arange(n, dtype="int32"):
    return tf.range(n, dtype=dtype)


floor = tf.floor
cos = tf.cos
sin = tf.sin
minimum = tf.minimum
abs = tf.abs  # noqa: A001 - as in the array namespace


def trunc(x):
    return tf.cast(tf.cast(x, tf.int32), x.dtype)


def where(condition, x, y):
    return tf.where(condition, x, y)


def clip(x, low, high):
    return tf.clip_by_value(x, low, high)


def argmax(x, axis):
    return tf.argmax(x, axis=axis)


def reduce_any(x, axis):
    return tf.reduce_any(x, axis=axis)


def reduce_sum(x, axis):
    return tf.reduce_sum(x, axis=axis)


def stack(arrays, axis):
    return tf.stack(arrays, axis=axis)


def pad(x, widths):
    return tf.pad(x, widths)


def take(x, indices):
    """`x[indices]` along the first axis."""
    return tf.gather(x, indices)


def gather_pixels(images, rows, columns):
    """`images[b, rows[b, i, j], columns[b, i, j]]`: `(batch, h, w)`."""
    return tf.gather_nd(images, tf.stack([rows, columns], axis=-1),
                        batch_dims=1)


def gather_rows(images, rows):
    """Row `rows[b, i]` of image b at row i; images `(batch, h, w, c)`."""
    return tf.gather(images, rows, axis=1, batch_dims=1)


def gather_columns(images, columns):
    """Column `columns[b, j]` of image b at column j."""
    return tf.gather(images, columns, axis=2, batch_dims=1)


def matmul_transposed(a, b):
    """`a[i] @ b[i].T` for each batch index i."""
    return tf.linalg.matmul(a, b, transpose_b=True)
