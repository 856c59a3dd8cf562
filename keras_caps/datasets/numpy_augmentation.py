"""The MNIST training augmentation of Efficient-CapsNet, vectorised in NumPy.

The same four steps, distributions and parameters as the `tf.data` version
(`keras_caps.datasets.augmentation`, whose docstring describes them), from
the official code of Mazzia et al. 2021 ("Efficient-CapsNet",
`utils/pre_process_mnist.py`), without TensorFlow:

1. **rotate** by `int(30 * r0)` degrees when `r1 <= 0`, `r0, r1 ~ N(0,
   0.33)` clipped to +-0.9999, counter-clockwise about (14, 14), bilinear
   with zero fill: one gather of the four neighbours of every output pixel;
2. **shift** within the empty margins (rolled, so the digit stays whole);
3. **squish** the width by `floor(7 r) + 1` pixels: one batched matmul with
   the 14 column operators shared with the TensorFlow version
   (`keras_caps.datasets.augmentation_parameters.squish_operators`);
4. **erase** a 4 x 4 patch with its corner uniform in [4, 22].

Randomness comes from a `numpy.random.Generator` per batch; the draws are
split from the pixel work (`draw_parameters`, then `apply_parameters`), so
that both versions can be fed the same draws and compared pixel for pixel.
The NumPy generator is not TensorFlow's: for the same seed the two versions
draw different (equally distributed) values.
"""

import numpy as np

from keras_caps.datasets import augmentation_parameters as parameters

_SIZE = parameters.SIZE
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
    """Draws the random values of the four steps for a batch.

    Args:
        batch_size: int.
        rng: `numpy.random.Generator`.

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

    >>> draws = draw_parameters(3, np.random.default_rng(0))
    >>> draws["erase_corners"].shape
    (3, 2)
    """
    rotation = np.clip(_normal(rng, (batch_size, 2)), -parameters.CLIP,
                       parameters.CLIP)
    # int() truncates towards zero.
    degrees = np.trunc(rotation[:, 0] * np.float32(parameters.MAX_ANGLE))
    degrees = np.where(rotation[:, 1] <= 0.0, degrees, np.float32(0.0))
    towards_end = rng.random((batch_size, 2)) * 2.0 >= 1.0
    # As the official code: the row direction with the second amount.
    amounts = _half_normal(rng, (batch_size, 2))
    squish = _half_normal(rng, (batch_size, 2))
    width_cut = np.floor(squish[:, 0] * np.float32(parameters.MAX_SQUISH)
                         + np.float32(1.0)).astype(np.int32)
    corners = np.floor(rng.random((batch_size, 2))
                       * parameters.ERASE_POSITIONS).astype(np.int32)
    return {
        "degrees": degrees.astype(np.float32),
        "row_towards_end": towards_end[:, 0],
        "row_amount": amounts[:, 1],
        "column_towards_end": towards_end[:, 1],
        "column_amount": amounts[:, 0],
        "squish_width_cut": width_cut,
        "squish_offset_extra": np.floor(
            squish[:, 1] * np.float32(2.0)).astype(np.int32),
        "erase_corners": corners + np.int32(parameters.ERASE_LOW),
    }


def _normal(rng, shape):
    return (rng.standard_normal(shape) * parameters.STDDEV).astype(
        np.float32)


def _half_normal(rng, shape):
    return np.minimum(np.abs(_normal(rng, shape)), np.float32(parameters.CLIP))


def apply_parameters(images, draws):
    """Applies the four steps with given draws (see `draw_parameters`).

    Args:
        images: float32 array `(batch_size, 28, 28, 1)`, raw pixels.
        draws: dict of per-image draws, the keys of `draw_parameters`.

    Returns:
        float32 array of the same shape, values in [0, 255].

    Example:

    >>> images = np.zeros((2, 28, 28, 1), np.float32)
    >>> draws = draw_parameters(2, np.random.default_rng(0))
    >>> apply_parameters(images, draws).shape
    (2, 28, 28, 1)
    """
    images = np.asarray(images, np.float32)
    images = rotate_by(images, draws["degrees"])
    row_shift = margin_shift(images[..., 0].sum(axis=2) > 0.0,
                             draws["row_towards_end"], draws["row_amount"])
    column_shift = margin_shift(images[..., 0].sum(axis=1) > 0.0,
                                draws["column_towards_end"],
                                draws["column_amount"])
    images = roll(images, row_shift, column_shift)
    images = squish(images, draws["squish_width_cut"],
                    draws["squish_offset_extra"])
    return erase(images, draws["erase_corners"])


def rotate_by(images, degrees):
    """Rotates image b counter-clockwise by `degrees[b]` about (14, 14).

    Bilinear, zero fill, OpenCV's convention (`getRotationMatrix2D` +
    `warpAffine`): output pixel (x, y) reads the input at the inverse
    rotation of (x, y), with the four neighbours weighted bilinearly and
    those outside the image read as 0. Images with `degrees == 0` are
    returned unchanged (exactly what the interpolation gives for them).

    Args:
        images: float32 array `(batch, 28, 28, 1)`.
        degrees: float array `(batch,)`.

    Returns:
        float32 array `(batch, 28, 28, 1)`.

    Example:

    >>> image = np.zeros((1, 28, 28, 1), np.float32)
    >>> image[0, 14, 20] = 1.0  # right of the centre
    >>> out = rotate_by(image, np.array([90.0]))
    >>> [int(i) for i in np.unravel_index(out.argmax(), (28, 28))]
    [8, 14]
    """
    images = np.asarray(images, np.float32)
    degrees = np.asarray(degrees, np.float32)
    out = images.copy()
    turned = np.flatnonzero(degrees != 0.0)
    if turned.size:
        out[turned] = _bilinear_rotation(images[turned], degrees[turned])
    return out


def _bilinear_rotation(images, degrees):
    batch = len(images)
    radians = degrees * np.float32(np.pi / 180.0)
    cos, sin = np.cos(radians)[:, None, None], np.sin(radians)[:, None, None]
    center = np.float32(_SIZE / 2.0)
    x = np.arange(_SIZE, dtype=np.float32)[None, None, :]  # output column
    y = np.arange(_SIZE, dtype=np.float32)[None, :, None]  # output row
    # (batch, 28, 28): where each output pixel samples the input.
    source_x = cos * x - sin * y + (center - cos * center + sin * center)
    source_y = sin * x + cos * y + (center - sin * center - cos * center)
    # Zero borders (1 before, 2 after) stand for everything outside: a
    # sample clipped to [-1, 28] reads only zeros where it left the image.
    width = _SIZE + 3
    padded = np.zeros((batch, width, width), np.float32)
    padded[:, 1:_SIZE + 1, 1:_SIZE + 1] = images[..., 0]
    flat = padded.reshape(-1)
    source_x = np.clip(source_x, -1.0, float(_SIZE))
    source_y = np.clip(source_y, -1.0, float(_SIZE))
    x0, y0 = np.floor(source_x), np.floor(source_y)
    # The weights of the lower and upper neighbour along each axis.
    row_weights = (y0 + np.float32(1.0) - source_y, source_y - y0)
    column_weights = (x0 + np.float32(1.0) - source_x, source_x - x0)
    # Index of each sample's upper-left neighbour in the flattened batch.
    corner = ((y0 + 1.0) * width + (x0 + 1.0)).astype(np.intp) + (
        np.arange(batch) * width * width)[:, None, None]
    out = np.zeros((batch, _SIZE, _SIZE), np.float32)
    for dy in (0, 1):
        for dx in (0, 1):
            values = np.take(flat, corner + (dy * width + dx))
            out += row_weights[dy] * column_weights[dx] * values
    return out[..., None]


def margin_shift(occupied, towards_end, amounts):
    """Signed integer shifts within the empty margins of each image.

    Towards the end (down / right): `floor(amount * (end_margin + 1))`;
    towards the start: `floor(-amount * start_margin)`, where the margins
    count the empty rows (columns) before the first and after the last
    occupied one. An empty image is not shifted.

    Args:
        occupied: bool array `(batch, 28)`: rows (columns) with ink.
        towards_end: bool array `(batch,)`.
        amounts: float array `(batch,)`, in [0, 1).

    Returns:
        int32 array `(batch,)`.

    Example:

    >>> occupied = np.zeros((1, 28), bool)
    >>> occupied[0, 10:20] = True  # margins 10 and 8
    >>> margin_shift(occupied, np.array([True]), np.array([0.5])).tolist()
    [4]
    """
    occupied = np.asarray(occupied, bool)
    amounts = np.asarray(amounts, np.float32)
    start_margin = np.argmax(occupied, axis=1).astype(np.float32)
    end_margin = np.argmax(occupied[:, ::-1], axis=1).astype(np.float32)
    shift = np.where(towards_end,
                     np.floor(amounts * (end_margin + np.float32(1.0))),
                     np.floor(-amounts * start_margin))
    return np.where(occupied.any(axis=1), shift, 0.0).astype(np.int32)


def roll(images, row_shift, column_shift):
    """Rolls image b by `row_shift[b]` rows and `column_shift[b]` columns.

    Pixel p of the output is pixel `(p - shift) mod 28` of the input.

    Args:
        images: array `(batch, 28, 28, 1)`.
        row_shift: int array `(batch,)`.
        column_shift: int array `(batch,)`.

    Returns:
        array of the shape and dtype of `images`.

    Example:

    >>> image = np.arange(28 * 28).reshape(1, 28, 28, 1)
    >>> int(roll(image, np.array([1]), np.array([2]))[0, 1, 2, 0])
    0
    """
    images = np.asarray(images)
    positions = np.arange(_SIZE)[None, :]
    rows = (positions - np.asarray(row_shift)[:, None]) % _SIZE  # (b, 28)
    columns = (positions - np.asarray(column_shift)[:, None]) % _SIZE
    # One gather of the flattened batch: (b, 28, 28).
    index = (rows[:, :, None] * _SIZE + columns[:, None, :]
             + (np.arange(len(images)) * _SIZE * _SIZE)[:, None, None])
    return np.take(images.reshape(-1), index).reshape(images.shape)


def squish(images, width_cut, offset_extra):
    """Squishes image b by `width_cut[b]` pixels, at `offset_extra[b]`.

    The antialiased Lanczos-3 resize to width `28 - width_cut`, placed at
    column `width_cut // 2 + offset_extra` and cropped to 28 columns, as
    one batched matmul with the shared column operators; Lanczos ringing is
    clipped back to [0, 255].

    Args:
        images: float32 array `(batch, 28, 28, 1)`.
        width_cut: int array `(batch,)`, in 1..7.
        offset_extra: int array `(batch,)`, 0 or 1.

    Returns:
        float32 array `(batch, 28, 28, 1)`.

    Example:

    >>> images = np.full((1, 28, 28, 1), 100.0, np.float32)
    >>> out = squish(images, np.array([7]), np.array([0]))
    >>> round(float(out[0, 0, 0, 0]), 3), round(float(out[0, 0, 3, 0]), 3)
    (0.0, 100.0)
    """
    operators = parameters.squish_operators()[
        parameters.squish_index(width_cut, offset_extra)]  # (b, out, in)
    # (b, row, in col) @ (b, in col, out col) -> (b, row, out col)
    squished = np.matmul(np.asarray(images, np.float32)[..., 0],
                         operators.transpose(0, 2, 1))
    return np.clip(squished, 0.0, parameters.PIXEL_MAX)[..., None]


def erase(images, corners):
    """Zeroes the 4 x 4 patch of image b with top-left corner `corners[b]`.

    Args:
        images: array `(batch, 28, 28, 1)`.
        corners: int array `(batch, 2)`: (row, column).

    Returns:
        array of the shape and dtype of `images`.

    Example:

    >>> images = np.ones((1, 28, 28, 1), np.float32)
    >>> float(erase(images, np.array([[4, 4]])).sum())
    768.0
    """
    corners = np.asarray(corners)
    positions = np.arange(_SIZE)[None, :]
    size = parameters.ERASE_SIZE
    in_rows = ((positions >= corners[:, :1])
               & (positions < corners[:, :1] + size))  # (b, 28)
    in_columns = ((positions >= corners[:, 1:])
                  & (positions < corners[:, 1:] + size))
    patch = in_rows[:, :, None] & in_columns[:, None, :]
    return np.where(patch[..., None], np.zeros((), images.dtype), images)


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
