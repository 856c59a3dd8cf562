"""The MNIST training augmentation of Efficient-CapsNet, written once.

The augmentation of the official code of Mazzia et al. 2021
("Efficient-CapsNet", `utils/pre_process_mnist.py`), as batched array
operations without OpenCV: every step is written here once against an
executor (`numpy_ops` for the NumPy pipeline, `tf_data_ops` for `tf.data`),
which supplies the array operations and the random draws. Its constants
and the squish operators are `augmentation_parameters`. The four steps, in
the official order:

1. **rotate**: `r0, r1 ~ N(0, 0.33)` clipped to +-0.9999; when `r1 <= 0`
   (probability 1/2) rotate by `int(30 * r0)` degrees (truncated towards
   zero, so within +-29) counter-clockwise about the pixel point (14, 14),
   bilinear, zero fill (OpenCV's `getRotationMatrix2D` + `warpAffine`).
2. **shift**: per axis, a direction with probability 1/2 each and an
   amount `floor(r * m)`, `r = min(|N(0, 0.33)|, 0.9999)`, where `m` is the
   empty margin of the (rotated) digit towards the left or top, or that
   margin + 1 towards the right or bottom; the image is rolled, so the
   digit never leaves the frame.
3. **squish**: the width shrinks by `w = floor(7 * r0) + 1` pixels with an
   antialiased Lanczos-3 resize to 28 x (28 - w), and the result is placed
   at column `w // 2 + floor(2 * r1)` of a zero canvas cropped to 28 x 28.
   The resize is linear, so it is applied as one of 14 precomputed 28 x 28
   column operators (one per `(w, offset)`), i.e. one batched matmul.
   Lanczos ringing can leave the pixel range, so the result is clipped back
   to [0, 255].
4. **erase**: a 4 x 4 patch whose top-left corner (row, column) is uniform
   in the integers [4, 22] is zeroed.

Images are raw pixels (float32 in [0, 255]); every step is scale-free, so
the official code's /256 scaling makes no difference. The draws are split
from the pixel work (`draw_parameters`, then `apply_parameters`): the two
executors draw from different generators (NumPy's, TensorFlow's stateless
ops), so they give different but equally distributed images for a seed,
and the same pixels for the same draws.
"""

import math

from keras_caps.datasets import augmentation_parameters as parameters

_SIZE = parameters.SIZE


def draw_parameters(batch_size, random, ops):
    """Draws the random values of the four steps for a batch.

    Args:
        batch_size: int (or a scalar tensor).
        random: the executor's random draws (`numpy_ops.NumpyRandom` or
            `tf_data_ops.StatelessRandom`); five draws are made, in this
            order: normal, uniform, normal, normal, uniform.
        ops: the executor (`numpy_ops` or `tf_data_ops`).

    Returns:
        dict of arrays with leading dimension `batch_size`:
        `"degrees"` (float32, integers in [-29, 29], 0 for about half the
        images), `"row_towards_end"` and `"column_towards_end"` (bool: shift
        down / right), `"row_amount"` and `"column_amount"` (float32 in
        [0, 0.9999]: the share of the margin to shift by),
        `"squish_width_cut"` (int32 in [1, 7]), `"squish_offset_extra"`
        (int32 in {0, 1}) and `"erase_corners"` (int32 `(batch, 2)`, the
        patch's top-left (row, column), in [4, 22]).

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> random = numpy_ops.NumpyRandom(np.random.default_rng(0))
    >>> draws = draw_parameters(3, random, numpy_ops)
    >>> draws["erase_corners"].shape
    (3, 2)
    """
    rotation = ops.clip(random.normal((batch_size, 2), parameters.STDDEV),
                        -parameters.CLIP, parameters.CLIP)
    # int() truncates towards zero.
    degrees = ops.trunc(rotation[:, 0] * parameters.MAX_ANGLE)
    towards_end = random.uniform((batch_size, 2)) * 2.0 >= 1.0
    # As the official code: the row direction with the second amount.
    amounts = _half_normal(random, batch_size, ops)
    squish = _half_normal(random, batch_size, ops)
    corners = ops.floor(random.uniform((batch_size, 2))
                        * parameters.ERASE_POSITIONS)
    return {
        "degrees": ops.where(rotation[:, 1] <= 0.0, degrees, 0.0),
        "row_towards_end": towards_end[:, 0],
        "row_amount": amounts[:, 1],
        "column_towards_end": towards_end[:, 1],
        "column_amount": amounts[:, 0],
        "squish_width_cut": ops.int32(ops.floor(
            squish[:, 0] * parameters.MAX_SQUISH + 1.0)),
        "squish_offset_extra": ops.int32(ops.floor(squish[:, 1] * 2.0)),
        "erase_corners": ops.int32(corners) + parameters.ERASE_LOW,
    }


def _half_normal(random, batch_size, ops):
    draws = random.normal((batch_size, 2), parameters.STDDEV)
    return ops.minimum(ops.abs(draws), parameters.CLIP)


def apply_parameters(images, draws, ops):
    """Applies the four steps with given draws (see `draw_parameters`).

    Args:
        images: float32 `(batch_size, 28, 28, 1)`, raw pixels.
        draws: dict of per-image draws, the keys of `draw_parameters`.
        ops: the executor (`numpy_ops` or `tf_data_ops`).

    Returns:
        float32 of the same shape, values in [0, 255].

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> images = np.zeros((2, 28, 28, 1), np.float32)
    >>> draws = draw_parameters(
    ...     2, numpy_ops.NumpyRandom(np.random.default_rng(0)), numpy_ops)
    >>> apply_parameters(images, draws, numpy_ops).shape
    (2, 28, 28, 1)
    """
    images = ops.float32(images)
    images = rotate_by(images, ops.float32(draws["degrees"]), ops)
    row_shift = margin_shift(ops.reduce_sum(images[..., 0], axis=2) > 0.0,
                             draws["row_towards_end"],
                             ops.float32(draws["row_amount"]), ops)
    column_shift = margin_shift(ops.reduce_sum(images[..., 0], axis=1) > 0.0,
                                draws["column_towards_end"],
                                ops.float32(draws["column_amount"]), ops)
    images = roll(images, row_shift, column_shift, ops)
    images = squish(images, ops.int32(draws["squish_width_cut"]),
                    ops.int32(draws["squish_offset_extra"]), ops)
    return erase(images, ops.int32(draws["erase_corners"]), ops)


def rotate_by(images, degrees, ops):
    """Rotates image b counter-clockwise by `degrees[b]` about (14, 14).

    Bilinear, zero fill, OpenCV's convention (`getRotationMatrix2D` +
    `warpAffine`): output pixel (x, y) reads the input at the inverse
    rotation of (x, y), with the four neighbours weighted bilinearly and
    those outside the image read as 0. Images with `degrees == 0` are
    returned unchanged.

    Args:
        images: float32 `(batch, 28, 28, 1)`.
        degrees: float32 `(batch,)`.
        ops: the executor.

    Returns:
        float32 `(batch, 28, 28, 1)`.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> image = np.zeros((1, 28, 28, 1), np.float32)
    >>> image[0, 14, 20] = 1.0  # right of the centre
    >>> out = rotate_by(image, np.array([90.0], np.float32), numpy_ops)
    >>> [int(i) for i in np.unravel_index(out.argmax(), (28, 28))]
    [8, 14]
    """
    degrees = ops.float32(degrees)
    radians = degrees * (math.pi / 180.0)
    cos = ops.cos(radians)[:, None, None]
    sin = ops.sin(radians)[:, None, None]
    center = _SIZE / 2.0
    x = ops.float32(ops.arange(_SIZE))[None, None, :]  # output column
    y = ops.float32(ops.arange(_SIZE))[None, :, None]  # output row
    # (batch, 28, 28): where each output pixel samples the input, clipped
    # to [-1, 28]: the zero borders (1 before, 2 after) stand for
    # everything outside the image.
    source_x = ops.clip(cos * x - sin * y + (center - cos * center
                                             + sin * center), -1.0, _SIZE)
    source_y = ops.clip(sin * x + cos * y + (center - sin * center
                                             - cos * center), -1.0, _SIZE)
    padded = ops.pad(images[..., 0], [[0, 0], [1, 2], [1, 2]])
    x0, y0 = ops.floor(source_x), ops.floor(source_y)
    # The weights of the lower and upper neighbour along each axis.
    row_weights = (y0 + 1.0 - source_y, source_y - y0)
    column_weights = (x0 + 1.0 - source_x, source_x - x0)
    row, column = ops.int32(y0) + 1, ops.int32(x0) + 1  # in `padded`
    rotated = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            rotated += (row_weights[dy] * column_weights[dx]
                        * ops.gather_pixels(padded, row + dy, column + dx))
    return ops.where((degrees != 0.0)[:, None, None, None],
                     rotated[..., None], images)


def margin_shift(occupied, towards_end, amounts, ops):
    """Signed integer shifts within the empty margins of each image.

    Towards the end (down / right): `floor(amount * (end_margin + 1))`;
    towards the start: `floor(-amount * start_margin)`, where the margins
    count the empty rows (columns) before the first and after the last
    occupied one. An empty image is not shifted.

    Args:
        occupied: bool `(batch, 28)`: rows (columns) with ink.
        towards_end: bool `(batch,)`.
        amounts: float32 `(batch,)`, in [0, 1).
        ops: the executor.

    Returns:
        int32 `(batch,)`.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> occupied = np.zeros((1, 28), bool)
    >>> occupied[0, 10:20] = True  # margins 10 and 8
    >>> margin_shift(occupied, np.array([True]),
    ...              np.array([0.5], np.float32), numpy_ops).tolist()
    [4]
    """
    ink = ops.int32(occupied)
    start_margin = ops.float32(ops.argmax(ink, axis=1))
    end_margin = ops.float32(ops.argmax(ink[:, ::-1], axis=1))
    shift = ops.where(towards_end, ops.floor(amounts * (end_margin + 1.0)),
                      ops.floor(-amounts * start_margin))
    return ops.int32(ops.where(ops.reduce_any(occupied, axis=1), shift,
                               0.0))


def roll(images, row_shift, column_shift, ops):
    """Rolls image b by `row_shift[b]` rows and `column_shift[b]` columns.

    Pixel p of the output is pixel `(p - shift) mod 28` of the input.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> image = np.arange(28 * 28).reshape(1, 28, 28, 1)
    >>> int(roll(image, np.array([1]), np.array([2]), numpy_ops)[0, 1, 2, 0])
    0
    """
    positions = ops.arange(_SIZE)[None, :]
    rows = (positions - row_shift[:, None]) % _SIZE  # (batch, 28)
    columns = (positions - column_shift[:, None]) % _SIZE
    return ops.gather_columns(ops.gather_rows(images, rows), columns)


def squish(images, width_cut, offset_extra, ops):
    """Squishes image b by `width_cut[b]` pixels, at `offset_extra[b]`.

    The antialiased Lanczos-3 resize to width `28 - width_cut`, placed at
    column `width_cut // 2 + offset_extra` and cropped to 28 columns, as
    one batched matmul with the column operators of
    `augmentation_parameters.squish_operators`; Lanczos ringing is clipped
    back to [0, 255].

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> images = np.full((1, 28, 28, 1), 100.0, np.float32)
    >>> out = squish(images, np.array([7]), np.array([0]), numpy_ops)
    >>> round(float(out[0, 0, 0, 0]), 3), round(float(out[0, 0, 3, 0]), 3)
    (0.0, 100.0)
    """
    index = (width_cut - 1) * 2 + offset_extra  # `squish_index`
    operators = ops.take(ops.constant(parameters.squish_operators()),
                         index)  # (batch, out column, in column)
    # (batch, row, in column) @ (batch, in column, out column)
    squished = ops.matmul_transposed(images[..., 0], operators)
    return ops.clip(squished, 0.0, parameters.PIXEL_MAX)[..., None]


def erase(images, corners, ops):
    """Zeroes the 4 x 4 patch of image b with top-left corner `corners[b]`
    (row, column).

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> images = np.ones((1, 28, 28, 1), np.float32)
    >>> float(erase(images, np.array([[4, 4]]), numpy_ops).sum())
    768.0
    """
    positions = ops.arange(_SIZE)[None, :]
    size = parameters.ERASE_SIZE
    in_rows = ((positions >= corners[:, :1])
               & (positions < corners[:, :1] + size))  # (batch, 28)
    in_columns = ((positions >= corners[:, 1:])
                  & (positions < corners[:, 1:] + size))
    patch = in_rows[:, :, None] & in_columns[:, None, :]
    return ops.where(patch[..., None], 0.0, images)
