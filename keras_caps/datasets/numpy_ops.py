"""The NumPy executor: the array operations and random draws the datasets'
shared steps (`augmentation_steps`, `multi_mnist_pairs`) are written in,
with NumPy alone (no TensorFlow), for the NumPy pipeline.

`tf_data_ops` is the same interface in TensorFlow, for `tf.data`; a step
written against it runs on either, so its logic exists once.

Example:

>>> from keras_caps.datasets import augmentation_steps, numpy_ops
>>> images = np.zeros((2, 28, 28, 1), np.float32)
>>> draws = augmentation_steps.draw_parameters(
...     2, NumpyRandom(np.random.default_rng(0)), numpy_ops)
>>> augmentation_steps.apply_parameters(images, draws, numpy_ops).shape
(2, 28, 28, 1)
"""

import numpy as np


class NumpyRandom:
    """Random draws from a `numpy.random.Generator`, in the order asked.

    Args:
        rng: `numpy.random.Generator`.
    """

    def __init__(self, rng):
        self.rng = rng

    def normal(self, shape, stddev):
        """float32 draws of N(0, stddev^2)."""
        return (self.rng.standard_normal(shape) * stddev).astype(np.float32)

    def uniform(self, shape):
        """Draws uniform in [0, 1) (float64)."""
        return self.rng.random(shape)


def float32(x):
    return np.asarray(x, np.float32)


def int32(x):
    return np.asarray(x).astype(np.int32)


def constant(x):
    return np.asarray(x)


def arange(n, dtype="int32"):
    return np.arange(n, dtype=dtype)


floor = np.floor
trunc = np.trunc
cos = np.cos
sin = np.sin
where = np.where
minimum = np.minimum
abs = np.abs  # noqa: A001 - as in the array namespace


def clip(x, low, high):
    return np.clip(x, low, high)


def argmax(x, axis):
    return np.argmax(x, axis=axis)


def reduce_any(x, axis):
    return np.any(x, axis=axis)


def reduce_sum(x, axis):
    return np.sum(x, axis=axis)


def stack(arrays, axis):
    return np.stack(arrays, axis=axis)


def pad(x, widths):
    return np.pad(x, widths)


def take(x, indices):
    """`x[indices]` along the first axis."""
    return np.asarray(x)[np.asarray(indices)]


def gather_pixels(images, rows, columns):
    """`images[b, rows[b, i, j], columns[b, i, j]]`: `(batch, h, w)`."""
    batch = np.arange(len(images))[:, None, None]
    return images[batch, rows, columns]


def gather_rows(images, rows):
    """Row `rows[b, i]` of image b at row i; images `(batch, h, w, c)`."""
    return np.take_along_axis(images, rows[:, :, None, None], axis=1)


def gather_columns(images, columns):
    """Column `columns[b, j]` of image b at column j."""
    return np.take_along_axis(images, columns[:, None, :, None], axis=2)


def matmul_transposed(a, b):
    """`a[i] @ b[i].T` for each batch index i."""
    return np.matmul(a, np.swapaxes(b, -1, -2))
