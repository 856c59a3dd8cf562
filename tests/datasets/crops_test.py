import numpy as np
import tensorflow as tf

from keras_caps.datasets import crops


def test_crop_takes_each_window_at_its_offset():
    images = np.arange(3 * 6 * 6 * 2, dtype="float32").reshape(3, 6, 6, 2)
    offsets = np.array([[0, 0], [2, 1], [3, 3]], "int32")
    out = crops.crop(images, tf.constant(offsets), size=3).numpy()
    for image, (row, column), window in zip(images, offsets, out,
                                            strict=True):
        np.testing.assert_array_equal(
            window, image[row:row + 3, column:column + 3])


def test_crop_keeps_rank_and_dtype():
    images = tf.zeros((2, 5, 5), tf.uint8)
    out = crops.crop(images, tf.zeros((2, 2), tf.int32), size=4)
    assert out.shape == (2, 4, 4) and out.dtype == tf.uint8


def test_random_crop_is_a_seeded_window_of_each_image():
    images = np.random.default_rng(0).uniform(
        size=(16, 8, 8, 1)).astype("float32")
    out = crops.random_crop(images, size=5, seed=(1, 2)).numpy()
    again = crops.random_crop(images, size=5, seed=(1, 2)).numpy()
    np.testing.assert_array_equal(out, again)
    seen = set()
    for image, window in zip(images, out, strict=True):
        matches = [(row, column) for row in range(4) for column in range(4)
                   if np.array_equal(image[row:row + 5, column:column + 5],
                                     window)]
        assert len(matches) == 1
        seen.add(matches[0])
    assert len(seen) > 1
