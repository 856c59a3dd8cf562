import numpy as np
import tensorflow as tf

from keras_caps.datasets import augmentation
from keras_caps.datasets import augmentation_parameters
from keras_caps.datasets import augmentation_steps as steps
from keras_caps.datasets import tf_data_ops
from tests.datasets import fixtures


def digits(num_examples=64):
    images, _ = fixtures.synthetic_digits(num_examples)
    return images.astype("float32")[..., None]


def one_step(step, images, seed):
    """One of the four steps alone on `tf.data`'s executor, with the draws
    `augment_mnist(images, seed)` makes."""
    images = tf.constant(images)
    draws = augmentation.draw_parameters(len(images), seed)
    if step == "rotate":
        return steps.rotate_by(images, draws["degrees"], tf_data_ops)
    if step == "shift":
        rows = steps.margin_shift(
            tf.reduce_sum(images[..., 0], axis=2) > 0.0,
            draws["row_towards_end"], draws["row_amount"], tf_data_ops)
        columns = steps.margin_shift(
            tf.reduce_sum(images[..., 0], axis=1) > 0.0,
            draws["column_towards_end"], draws["column_amount"],
            tf_data_ops)
        return steps.roll(images, rows, columns, tf_data_ops)
    if step == "squish":
        return steps.squish(images, draws["squish_width_cut"],
                            draws["squish_offset_extra"], tf_data_ops)
    return steps.erase(images, draws["erase_corners"], tf_data_ops)


def bilinear_rotation_reference(image, degrees, center=14.0):
    """OpenCV `warpAffine(getRotationMatrix2D(center, degrees, 1))`."""
    alpha = np.cos(np.radians(degrees))
    beta = np.sin(np.radians(degrees))
    out = np.zeros_like(image)
    size = image.shape[0]
    for y in range(size):
        for x in range(size):
            src_x = alpha * (x - center) - beta * (y - center) + center
            src_y = beta * (x - center) + alpha * (y - center) + center
            x0, y0 = int(np.floor(src_x)), int(np.floor(src_y))
            value = 0.0
            for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
                xi, yi = x0 + dx, y0 + dy
                if 0 <= xi < size and 0 <= yi < size:
                    weight = ((1 - abs(src_x - xi)) * (1 - abs(src_y - yi)))
                    value += weight * image[yi, xi]
            out[y, x] = value
    return out


def test_shape_range_and_effect():
    images = digits()
    out = augmentation.augment_mnist(images, seed=(1, 2)).numpy()
    assert out.shape == images.shape and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 255.0
    changed = np.any(np.abs(out - images) > 1e-3, axis=(1, 2, 3))
    assert changed.all()  # squish and erase always apply


def test_deterministic_given_seed():
    images = digits(16)
    first = augmentation.augment_mnist(images, seed=(3, 4)).numpy()
    second = augmentation.augment_mnist(images, seed=(3, 4)).numpy()
    other = augmentation.augment_mnist(images, seed=(3, 5)).numpy()
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


def test_rotation_matches_opencv_convention():
    image = digits(1)[0, ..., 0]
    for degrees in (90.0, -17.0):
        out = steps.rotate_by(
            tf.constant(image[None, ..., None]), tf.constant([degrees]),
            tf_data_ops).numpy()[0, ..., 0]
        np.testing.assert_allclose(
            out, bilinear_rotation_reference(image, degrees), atol=1e-3)
    # 90 degrees counter-clockwise about (14, 14): out[y, x] = in[x, 28 - y].
    out = steps.rotate_by(tf.constant(image[None, ..., None]),
                          tf.constant([90.0]), tf_data_ops).numpy()[0, ..., 0]
    np.testing.assert_allclose(out[1:], image[:, :0:-1].T, atol=1e-3)


def test_rotation_applies_about_half_the_time():
    images = digits(400)
    out = one_step("rotate", images, tf.constant([5, 6], tf.int64)).numpy()
    unchanged = np.all(out == images, axis=(1, 2, 3)).mean()
    # Half are skipped; a few more draw an angle that truncates to 0.
    assert 0.4 < unchanged < 0.7


def test_shift_keeps_the_digit_in_frame():
    images = digits(200)
    out = one_step("shift", images, tf.constant([1, 1], tf.int64)).numpy()
    np.testing.assert_allclose(out.sum(axis=(1, 2, 3)),
                               images.sum(axis=(1, 2, 3)), rtol=1e-6)
    moved = 0
    for before, after in zip(images[..., 0], out[..., 0], strict=True):
        rows, cols = np.nonzero(before)
        new_rows, new_cols = np.nonzero(after)
        dy, dx = new_rows.min() - rows.min(), new_cols.min() - cols.min()
        # A pure translation within the empty margins, no wrap-around.
        np.testing.assert_array_equal(np.roll(before, (dy, dx), (0, 1)),
                                      after)
        assert -rows.min() <= dy <= 27 - rows.max()
        assert -cols.min() <= dx <= 27 - cols.max()
        moved += (dy, dx) != (0, 0)
    assert moved > 50


def test_squish_operators_match_the_official_resize():
    image = digits(1)[0]
    operators = augmentation_parameters.squish_operators()
    assert operators.shape == (14, 28, 28)
    for width_cut in range(1, 8):
        for extra in (0, 1):
            official = tf.image.resize(image, [28, 28 - width_cut],
                                       method="lanczos3", antialias=True)
            official = tf.image.pad_to_bounding_box(
                official, 0, width_cut // 2 + extra, 28, 28 + extra)
            official = tf.image.crop_to_bounding_box(official, 0, 0, 28, 28)
            mine = np.einsum("rj,cj->rc", image[..., 0],
                             operators[2 * (width_cut - 1) + extra])
            np.testing.assert_allclose(mine, official.numpy()[..., 0],
                                       atol=1e-3)


def test_squish_narrows_the_digit():
    images = digits(100)
    out = one_step("squish", images, tf.constant([2, 3], tf.int64)).numpy()
    assert out.min() >= 0.0 and out.max() <= 255.0

    def horizontal_spread(batch):
        mass = batch[..., 0].sum(axis=1)  # (batch, columns)
        columns = np.arange(28)
        mean = (mass * columns).sum(1) / mass.sum(1)
        return np.sqrt((mass * (columns - mean[:, None])**2).sum(1)
                       / mass.sum(1))

    # The width shrinks by 1 to 7 of 28 pixels (clipping the Lanczos
    # ringing can widen a barely squished digit a little).
    ratio = horizontal_spread(out) / horizontal_spread(images)
    assert ratio.mean() < 0.97 and np.all(ratio > 0.7)


def test_erase_zeroes_one_4x4_patch():
    images = np.full((300, 28, 28, 1), 255.0, np.float32)
    out = one_step("erase", images, tf.constant([7, 8], tf.int64)).numpy()
    corners = []
    for image in out[..., 0]:
        rows, cols = np.nonzero(image == 0.0)
        assert len(rows) == 16
        assert rows.max() - rows.min() == 3 and cols.max() - cols.min() == 3
        corners.append((rows.min(), cols.min()))
    corners = np.array(corners)
    assert corners.min() == 4 and corners.max() == 22
