"""The MNIST training augmentation of Efficient-CapsNet, with NumPy alone.

The four steps of `augmentation_steps` (rotate, shift, squish, erase, as in
the official code of Mazzia et al. 2021; see there) run by the `numpy_ops`
executor, for the NumPy pipeline (no TensorFlow). Randomness comes from a
`numpy.random.Generator` per batch; the NumPy generator is not
TensorFlow's, so for the same seed this and `augmentation` (the `tf.data`
version) draw different, equally distributed values, and give the same
pixels for the same draws (`draw_parameters`, `apply_parameters`).

Also CapsNet's augmentation, `random_shift` (Sabour et al. 2017, §5).
"""

import numpy as np

from keras_caps.datasets import augmentation_steps as steps
from keras_caps.datasets import numpy_ops

_MAX_SHIFT = 2


def augment_mnist(images, rng):
    """Rotates, shifts, squishes and erases a batch of 28 x 28 digits.

    Args:
        images: float32 array `(batch_size, 28, 28, 1)`, raw pixels in
            [0, 255].
        rng: `numpy.random.Generator`. The draws of this batch.

    Returns:
        float32 array of the same shape, values in [0, 255].

    Example:

    >>> images = np.zeros((2, 28, 28, 1), np.float32)
    >>> augment_mnist(images, np.random.default_rng(0)).shape
    (2, 28, 28, 1)
    """
    images = np.asarray(images, np.float32)
    return apply_parameters(images, draw_parameters(len(images), rng))


def draw_parameters(batch_size, rng):
    """The random values of the four steps for a batch, from `rng`: the
    dict of `augmentation_steps.draw_parameters` (see there).

    Example:

    >>> draws = draw_parameters(3, np.random.default_rng(0))
    >>> draws["erase_corners"].shape
    (3, 2)
    """
    return steps.draw_parameters(batch_size, numpy_ops.NumpyRandom(rng),
                                 numpy_ops)


def apply_parameters(images, draws):
    """Applies the four steps with given draws (see `draw_parameters`).

    Example:

    >>> images = np.zeros((2, 28, 28, 1), np.float32)
    >>> draws = draw_parameters(2, np.random.default_rng(0))
    >>> apply_parameters(images, draws).shape
    (2, 28, 28, 1)
    """
    return steps.apply_parameters(images, draws, numpy_ops)


def random_shift(images, rng, max_shift=_MAX_SHIFT):
    """Translates each image by integer shifts in [-max_shift, max_shift].

    CapsNet's only augmentation (Sabour et al. 2017, §5): the shift of each
    axis is drawn uniformly per image; pixels that leave the frame are
    dropped and zeros come in. The NumPy twin of
    `keras_caps.datasets.mnist.random_shift`.

    Args:
        images: array `(batch, height, width, channels)`.
        rng: `numpy.random.Generator`.
        max_shift: int. Largest shift per axis. Defaults to `2`.

    Returns:
        array of the shape and dtype of `images`.

    Example:

    >>> images = np.ones((3, 28, 28, 1), np.float32)
    >>> random_shift(images, np.random.default_rng(0)).shape
    (3, 28, 28, 1)
    """
    shifts = rng.integers(-max_shift, max_shift + 1, size=(len(images), 2))
    return shift_with_zero_fill(images, shifts)


def shift_with_zero_fill(images, shifts):
    """Moves image b by `shifts[b] = (down, right)` pixels, zeros coming in.

    Args:
        images: array `(batch, height, width, channels)`.
        shifts: int array `(batch, 2)`.

    Returns:
        array of the shape and dtype of `images`.

    Example:

    >>> image = np.arange(9.0).reshape(1, 3, 3, 1)
    >>> shift_with_zero_fill(image, np.array([[1, -1]]))[0, ..., 0]
    array([[0., 0., 0.],
           [1., 2., 0.],
           [4., 5., 0.]])
    """
    images = np.asarray(images)
    height, width = images.shape[1:3]
    shifts = np.asarray(shifts)
    rows = np.arange(height)[None, :] - shifts[:, :1]  # (b, height)
    columns = np.arange(width)[None, :] - shifts[:, 1:]
    inside = (((rows >= 0) & (rows < height))[:, :, None]
              & ((columns >= 0) & (columns < width))[:, None, :])
    out = np.take_along_axis(
        images, np.clip(rows, 0, height - 1)[:, :, None, None], axis=1)
    out = np.take_along_axis(
        out, np.clip(columns, 0, width - 1)[:, None, :, None], axis=2)
    return np.where(inside[..., None], out, np.zeros((), images.dtype))
