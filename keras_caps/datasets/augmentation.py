"""The MNIST training augmentation of Efficient-CapsNet, vectorised in TF.

The augmentation of the official code of Mazzia et al. 2021
("Efficient-CapsNet", `utils/pre_process_mnist.py`), re-written as batched
TensorFlow ops without OpenCV or `py_function`. Every random
value is drawn per image from stateless ops, so a batch and a seed fix the
result. The four steps, in the official order:

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
the official code's /256 scaling makes no difference.
"""

import math

import tensorflow as tf

from keras_caps.datasets import augmentation_parameters as parameters
from keras_caps.datasets import crops

_SIZE = parameters.SIZE
_STDDEV = parameters.STDDEV
_CLIP = parameters.CLIP
_MAX_ANGLE = parameters.MAX_ANGLE
_MAX_SQUISH = parameters.MAX_SQUISH
_ERASE_SIZE = parameters.ERASE_SIZE
_ERASE_LOW = parameters.ERASE_LOW
_ERASE_POSITIONS = parameters.ERASE_POSITIONS
_PIXEL_MAX = parameters.PIXEL_MAX


def augment_mnist(images, seed):
    """Rotates, shifts, squishes and erases a batch of 28 x 28 digits.

    Args:
        images: float32 tensor of shape `(batch_size, 28, 28, 1)`, raw
            pixels in [0, 255].
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.

    Returns:
        float32 tensor of the same shape, values in [0, 255].

    Example:

    >>> images = tf.zeros((2, 28, 28, 1))
    >>> tuple(augment_mnist(images, seed=(1, 2)).shape)
    TensorShape([2, 28, 28, 1])
    """
    images = tf.convert_to_tensor(images, dtype=tf.float32)
    seed = tf.convert_to_tensor(seed, dtype_hint=tf.int64)
    seeds = tf.random.experimental.stateless_split(seed, num=4)
    images = _rotate(images, seeds[0])
    images = _shift(images, seeds[1])
    images = _squish(images, seeds[2])
    return _erase(images, seeds[3])


def draw_parameters(batch_size, seed):
    """The random values `augment_mnist(images, seed)` draws, per image.

    The same draws as `augment_mnist` makes for a batch of `batch_size`,
    as a dict of the keys `keras_caps.datasets.numpy_augmentation.
    draw_parameters` returns (see there), so that the two versions can be
    compared draw for draw.

    Args:
        batch_size: int.
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.

    Returns:
        dict of tensors with leading dimension `batch_size`.

    Example:

    >>> draws = draw_parameters(3, seed=(1, 2))
    >>> tuple(draws["erase_corners"].shape)
    (3, 2)
    """
    seed = tf.convert_to_tensor(seed, dtype_hint=tf.int64)
    seeds = tf.random.experimental.stateless_split(seed, num=4)
    towards_end, amounts = _shift_draws(batch_size, seeds[1])
    width_cut, offset_extra = _squish_draws(batch_size, seeds[2])
    return {
        "degrees": _rotation_degrees(batch_size, seeds[0]),
        "row_towards_end": towards_end[:, 0],
        "row_amount": amounts[:, 1],
        "column_towards_end": towards_end[:, 1],
        "column_amount": amounts[:, 0],
        "squish_width_cut": width_cut,
        "squish_offset_extra": offset_extra,
        "erase_corners": _erase_corners(batch_size, seeds[3]),
    }


def apply_parameters(images, parameters):
    """Applies the four steps with given draws (see `draw_parameters`).

    `augment_mnist(images, seed)` is `apply_parameters(images,
    draw_parameters(batch_size, seed))`; with the draws of
    `keras_caps.datasets.numpy_augmentation.draw_parameters` it gives the
    NumPy version's pixels (up to float rounding).

    Args:
        images: float32 tensor `(batch_size, 28, 28, 1)`, raw pixels.
        parameters: dict of per-image draws, the keys of
            `draw_parameters`.

    Returns:
        float32 tensor of the same shape, values in [0, 255].

    Example:

    >>> images = tf.zeros((2, 28, 28, 1))
    >>> out = apply_parameters(images, draw_parameters(2, seed=(1, 2)))
    >>> tuple(out.shape)
    (2, 28, 28, 1)
    """
    images = tf.convert_to_tensor(images, dtype=tf.float32)
    p = {key: tf.convert_to_tensor(value) for key, value in parameters.items()}
    images = _rotate_by(images, tf.cast(p["degrees"], tf.float32))
    towards_end = tf.stack([tf.cast(p["row_towards_end"], tf.bool),
                            tf.cast(p["column_towards_end"], tf.bool)], 1)
    # As drawn: column amounts first (see `_shift_by_draws`).
    amounts = tf.cast(tf.stack([p["column_amount"], p["row_amount"]], 1),
                      tf.float32)
    images = _shift_by_draws(images, towards_end, amounts)
    images = _squish_by(images, tf.cast(p["squish_width_cut"], tf.int32),
                        tf.cast(p["squish_offset_extra"], tf.int32))
    return _erase_at(images, tf.cast(p["erase_corners"], tf.int32))


def _clipped_normal(shape, seed):
    values = tf.random.stateless_normal(shape, seed, stddev=_STDDEV)
    return tf.clip_by_value(values, -_CLIP, _CLIP)


def _rotate(images, seed):
    return _rotate_by(images, _rotation_degrees(tf.shape(images)[0], seed))


def _rotation_degrees(batch_size, seed):
    draws = _clipped_normal([batch_size, 2], seed)
    degrees = tf.cast(tf.cast(draws[:, 0] * _MAX_ANGLE, tf.int32),
                      tf.float32)  # int() truncates towards zero
    return tf.where(draws[:, 1] <= 0.0, degrees, 0.0)


def _rotate_by(images, degrees):
    """Rotates each image counter-clockwise about (14, 14), bilinearly."""
    radians = degrees * (math.pi / 180.0)
    cos, sin = tf.cos(radians), tf.sin(radians)
    center = _SIZE / 2.0
    zeros = tf.zeros_like(cos)
    # Output pixel (x, y) samples the input at the inverse rotation of
    # OpenCV's forward matrix [[cos, sin, .], [-sin, cos, .]] about center.
    transforms = tf.stack([
        cos, -sin, center - cos * center + sin * center,
        sin, cos, center - sin * center - cos * center,
        zeros, zeros], axis=1)
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=transforms,
        output_shape=tf.constant([_SIZE, _SIZE], tf.int32),
        fill_value=tf.constant(0.0), interpolation="BILINEAR",
        fill_mode="CONSTANT")


def _shift(images, seed):
    towards_end, amounts = _shift_draws(tf.shape(images)[0], seed)
    return _shift_by_draws(images, towards_end, amounts)


def _shift_draws(batch_size, seed):
    direction_seed, amount_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=2))
    directions = tf.random.stateless_uniform([batch_size, 2], direction_seed)
    towards_end = directions * 2.0 >= 1.0  # floor(u * 2) == 1
    amounts = tf.minimum(tf.abs(tf.random.stateless_normal(
        [batch_size, 2], amount_seed, stddev=_STDDEV)), _CLIP)
    return towards_end, amounts


def _shift_by_draws(images, towards_end, amounts):
    """Rolls each image within its margins; `(batch, 2)` draws as drawn."""
    image = images[..., 0]
    # The official code draws the row direction from directions[:, 0] and
    # amounts[:, 1], the column direction from directions[:, 1] and
    # amounts[:, 0].
    row_shift = _margin_shift(tf.reduce_sum(image, axis=2) > 0.0,
                              towards_end[:, 0], amounts[:, 1])
    column_shift = _margin_shift(tf.reduce_sum(image, axis=1) > 0.0,
                                 towards_end[:, 1], amounts[:, 0])
    # Rolling by s is the window at offset (-s mod 28) of the image tiled
    # 2 x 2: that window reads pixel (p - s) mod 28 at p.
    offsets = tf.math.floormod(-tf.stack([row_shift, column_shift], axis=1),
                               _SIZE)
    return crops.crop(tf.tile(images, [1, 2, 2, 1]), offsets, _SIZE)


def _margin_shift(occupied, towards_end, amounts):
    """Signed shifts within the empty margins, from `(batch, 28)` masks."""
    occupied = tf.cast(occupied, tf.int32)
    start_margin = tf.cast(tf.argmax(occupied, axis=1), tf.float32)
    end_margin = tf.cast(tf.argmax(occupied[:, ::-1], axis=1), tf.float32)
    shift = tf.where(towards_end, tf.floor(amounts * (end_margin + 1.0)),
                     tf.floor(-amounts * start_margin))
    # An empty image has no margins to use.
    shift = tf.where(tf.reduce_any(occupied > 0, axis=1), shift, 0.0)
    return tf.cast(shift, tf.int32)


def _squish(images, seed):
    width_cut, offset_extra = _squish_draws(tf.shape(images)[0], seed)
    return _squish_by(images, width_cut, offset_extra)


def _squish_draws(batch_size, seed):
    draws = tf.minimum(tf.abs(tf.random.stateless_normal(
        [batch_size, 2], seed, stddev=_STDDEV)), _CLIP)
    width_cut = tf.cast(tf.floor(draws[:, 0] * _MAX_SQUISH + 1.0), tf.int32)
    offset_extra = tf.cast(tf.floor(draws[:, 1] * 2.0), tf.int32)
    return width_cut, offset_extra


def _squish_by(images, width_cut, offset_extra):
    """Squishes image b with operator `(width_cut[b], offset_extra[b])`."""
    index = (width_cut - 1) * 2 + offset_extra
    operators = tf.gather(tf.constant(_squish_operators()), index)
    # b: batch, r: row, j: input column, c: output column
    squished = tf.einsum("brjk,bcj->brck", images, operators)
    return tf.clip_by_value(squished, 0.0, _PIXEL_MAX)


def _squish_operators():
    """The 14 column operators, shape `(14, 28, 28)`: [out col, in col].

    Index `2 * (w - 1) + extra` is the resize to width `28 - w` placed at
    column `w // 2 + extra` (then cropped to 28 columns); see
    `keras_caps.datasets.augmentation_parameters.squish_operators`.
    """
    return parameters.squish_operators()


def _erase(images, seed):
    return _erase_at(images, _erase_corners(tf.shape(images)[0], seed))


def _erase_corners(batch_size, seed):
    corners = tf.random.stateless_uniform([batch_size, 2], seed)
    corners = tf.cast(tf.floor(corners * _ERASE_POSITIONS), tf.int32)
    return corners + _ERASE_LOW


def _erase_at(images, corners):
    """Zeroes the 4 x 4 patch at each (row, column) corner `(batch, 2)`."""
    positions = tf.range(_SIZE)[None, :]
    in_rows = ((positions >= corners[:, :1])
               & (positions < corners[:, :1] + _ERASE_SIZE))
    in_columns = ((positions >= corners[:, 1:])
                  & (positions < corners[:, 1:] + _ERASE_SIZE))
    patch = in_rows[:, :, None] & in_columns[:, None, :]
    return tf.where(patch[..., None], 0.0, images)
