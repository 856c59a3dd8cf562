"""The NumPy-only pieces of the Efficient-CapsNet MNIST augmentation.

Shared by the `tf.data` version (`keras_caps.datasets.augmentation`) and
the NumPy version (`keras_caps.datasets.numpy_augmentation`), so that both
draw from the same distributions and squish with the same operators. The
augmentation is the one of the official code of Mazzia et al. 2021
("Efficient-CapsNet", `utils/pre_process_mnist.py`); the module docstring of
`keras_caps.datasets.augmentation` describes its four steps.

No TensorFlow here: the squish's antialiased Lanczos-3 resize is computed
with NumPy, weight for weight as TensorFlow's `tf.image.resize(...,
method="lanczos3", antialias=True)` (its `ScaleAndTranslate` kernel)
computes it.
"""

import functools

import numpy as np

SIZE = 28
STDDEV = 0.33
CLIP = 0.9999
MAX_ANGLE = 30.0
MAX_SQUISH = SIZE // 4  # 7 pixels
ERASE_SIZE = 4
ERASE_LOW = 4
ERASE_POSITIONS = 19  # corners 4..22
PIXEL_MAX = 255.0
LANCZOS_RADIUS = 3.0


def lanczos3_resize_matrix(input_size, output_size):
    """The weights of an antialiased Lanczos-3 resize along one axis.

    As TensorFlow's `ScaleAndTranslate` kernel (zero translation, the
    `tf.image.resize` default) computes them: output pixel `x` samples the
    input at `s = (x + 0.5) * input_size / output_size`; input pixel `k`
    gets `L((k + 0.5 - s) / a)` with `L` the Lanczos window of radius 3 and
    `a = max(input_size / output_size, 1)` (the kernel is stretched when
    shrinking, which low-pass filters); each row is normalised to sum 1.

    Args:
        input_size: int. Pixels along the axis before resizing.
        output_size: int. Pixels after resizing.

    Returns:
        float32 array of shape `(output_size, input_size)`:
        `resized = matrix @ column`.

    Example:

    >>> matrix = lanczos3_resize_matrix(28, 27)
    >>> matrix.shape, bool(np.allclose(matrix.sum(axis=1), 1.0))
    ((27, 28), True)
    """
    # The kernel computes in float32; so does this, in the same order.
    scale = np.float32(output_size) / np.float32(input_size)
    inv_scale = np.float32(1.0 / np.float64(scale))
    kernel_scale = max(inv_scale, np.float32(1.0))
    samples = (np.arange(output_size, dtype=np.float32)
               + np.float32(0.5)) * inv_scale  # (out,)
    positions = (np.arange(input_size, dtype=np.float32)[None, :]
                 + np.float32(0.5) - samples[:, None])  # (out, in)
    distances = np.abs(positions * np.float32(1.0 / kernel_scale))
    weights = _lanczos(distances)
    return (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)


def _lanczos(x):
    """`3 sin(pi x) sin(pi x / 3) / (pi x)^2` on |x| <= 3, 1 at 0."""
    pi = np.float32(3.14159265359)
    radius = np.float32(LANCZOS_RADIUS)
    safe = np.where(x <= 1e-3, np.float32(1.0), x)
    values = (radius * np.sin(pi * safe) * np.sin(pi * safe / radius)
              / (pi * pi * safe * safe))
    values = np.where(x <= 1e-3, np.float32(1.0), values)
    return np.where(x > radius, np.float32(0.0), values).astype(np.float32)


@functools.cache
def squish_operators():
    """The 14 column operators of the squish, shape `(14, 28, 28)`.

    Operator `2 * (w - 1) + extra` (`w` in 1..7, `extra` in 0..1) maps the
    28 input columns of a row to its 28 output columns: the antialiased
    Lanczos-3 resize to width `28 - w`, placed at column `w // 2 + extra`
    of a zero canvas and cropped to 28 columns. Indexed `[out col, in col]`.

    Returns:
        float32 array of shape `(14, 28, 28)`. Read-only; cached.

    Example:

    >>> squish_operators().shape
    (14, 28, 28)
    """
    operators = []
    for width_cut in range(1, MAX_SQUISH + 1):
        width = SIZE - width_cut
        resize = lanczos3_resize_matrix(SIZE, width)  # (out col, in col)
        for extra in (0, 1):
            offset = width_cut // 2 + extra
            operator = np.zeros((SIZE, SIZE), np.float32)
            stop = min(offset + width, SIZE)
            operator[offset:stop] = resize[:stop - offset]
            operators.append(operator)
    operators = np.stack(operators)
    operators.setflags(write=False)
    return operators


def squish_index(width_cut, offset_extra):
    """The operator of `squish_operators` for a width cut and offset.

    Args:
        width_cut: int array. Pixels the width shrinks by, in 1..7.
        offset_extra: int array. 0 or 1, added to the offset `w // 2`.

    Returns:
        int array of the broadcast shape: `2 * (width_cut - 1) +
        offset_extra`.

    Example:

    >>> int(squish_index(7, 1))
    13
    """
    return (np.asarray(width_cut) - 1) * 2 + np.asarray(offset_extra)
