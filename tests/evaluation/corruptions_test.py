import math

import numpy as np
from absl.testing import parameterized

from keras_caps.evaluation import corruptions
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits


def _digits(num, seed=0):
    images, _ = synthetic_digits(num, seed=seed)
    # Keep only the bright bar (the background noise would fill the box).
    images = np.where(images > 100, images, 0)
    return images[..., None].astype("float32")


def _reference_matrix(rotation, shear, scale_x, scale_y):
    # rotation @ shear @ scale, multiplied out by hand.
    c, s = math.cos(rotation), math.sin(rotation)
    return np.array([[scale_x * c, scale_y * (c * shear - s)],
                     [scale_x * s, scale_y * (s * shear + c)]])


def _reference_translation(image, matrix, u, v, canvas):
    rows, cols = np.nonzero(image[..., 0])
    centre_in = (image.shape[1] - 1) / 2.0, (image.shape[0] - 1) / 2.0
    centre_out = (canvas - 1) / 2.0
    xs, ys = [], []
    for x in (cols.min() - 0.5, cols.max() + 0.5):
        for y in (rows.min() - 0.5, rows.max() + 0.5):
            mx, my = matrix @ [x - centre_in[0], y - centre_in[1]]
            xs.append(mx)
            ys.append(my)
    t = []
    for moved, fraction in ((xs, u), (ys, v)):
        low = -0.5 - centre_out - min(moved)
        high = canvas - 0.5 - centre_out - max(moved)
        t.append(low + fraction * (high - low) if low <= high else 0.0)
    return t


def _reference_warp(image, matrix, translation, canvas):
    """Inverse mapping, one output pixel at a time, bilinear by hand."""
    height, width = image.shape[:2]
    det = matrix[0, 0] * matrix[1, 1] - matrix[0, 1] * matrix[1, 0]
    inverse = np.array([[matrix[1, 1], -matrix[0, 1]],
                        [-matrix[1, 0], matrix[0, 0]]]) / det
    centre_in = (width - 1) / 2.0, (height - 1) / 2.0
    centre_out = (canvas - 1) / 2.0
    out = np.zeros((canvas, canvas))

    def pixel(r, c):
        if 0 <= r < height and 0 <= c < width:
            return float(image[r, c, 0])
        return 0.0

    for r in range(canvas):
        for c in range(canvas):
            x, y = inverse @ [c - centre_out - translation[0],
                              r - centre_out - translation[1]]
            x, y = x + centre_in[0], y + centre_in[1]
            x0, y0 = math.floor(x), math.floor(y)
            fx, fy = x - x0, y - y0
            out[r, c] = ((1 - fx) * (1 - fy) * pixel(y0, x0)
                         + fx * (1 - fy) * pixel(y0, x0 + 1)
                         + (1 - fx) * fy * pixel(y0 + 1, x0)
                         + fx * fy * pixel(y0 + 1, x0 + 1))
    return out


class AffineTest(TestCase):
    def test_sampler_matches_numpy_inverse_mapping(self):
        digits = _digits(3)
        parameters = corruptions.random_affine_parameters(3, seed=5)
        warped = corruptions.affine_transform(digits, parameters, 40)
        self.assertEqual(warped.shape, (3, 40, 40, 1))
        for index in range(3):
            matrix = _reference_matrix(
                *(parameters[key][index] for key in
                  ("rotation", "shear", "scale_x", "scale_y")))
            translation = _reference_translation(
                digits[index], matrix, parameters["translation_u"][index],
                parameters["translation_v"][index], 40)
            expected = _reference_warp(digits[index], matrix, translation,
                                       40)
            self.assertAllClose(warped[index, ..., 0], expected, atol=1e-3)

    def test_parameter_ranges_and_determinism(self):
        parameters = corruptions.random_affine_parameters(2000, seed=1)
        self.assertLessEqual(np.abs(parameters["rotation"]).max(),
                             math.radians(20))
        self.assertGreater(np.abs(parameters["rotation"]).max(),
                           math.radians(19))
        self.assertLessEqual(np.abs(parameters["shear"]).max(), 0.2)
        for key in ("scale_x", "scale_y"):
            self.assertTrue(np.all((parameters[key] >= 0.8)
                                   & (parameters[key] <= 1.2)))
        digits = _digits(4)
        first = corruptions.affine_test_set(digits, seed=3)
        self.assertAllClose(first, corruptions.affine_test_set(digits, 3))
        self.assertFalse(np.allclose(first,
                                     corruptions.affine_test_set(digits, 4)))

    def test_ink_is_kept_on_the_canvas(self):
        # Bilinear sampling keeps the ink's mass times det(A) when the
        # whole digit lands on the canvas.
        digits = _digits(20)
        parameters = corruptions.random_affine_parameters(20, seed=2)
        warped = corruptions.affine_transform(digits, parameters, 40)
        det = np.linalg.det(corruptions.affine_matrices(parameters))
        self.assertAllClose(warped.sum(axis=(1, 2, 3)),
                            det * digits.sum(axis=(1, 2, 3)), rtol=0.05)


class NoiseTest(TestCase):
    def test_gaussian_noise_statistics(self):
        images = np.full((20, 28, 28, 1), 128.0, "float32")
        noisy = corruptions.gaussian_noise(images, 0.1, seed=0)
        difference = noisy - images
        self.assertLess(abs(difference.mean()), 0.3)
        self.assertAllClose(difference.std(), 25.5, rtol=0.02)
        self.assertAllClose(noisy, corruptions.gaussian_noise(images, 0.1, 0))
        clipped = corruptions.gaussian_noise(images, 1.0, seed=0)
        self.assertEqual((clipped.min(), clipped.max()), (0.0, 255.0))

    @parameterized.parameters(0.0, 0.1, 0.4, 1.0)
    def test_pixel_corruption_replaces_the_fraction(self, fraction):
        images = np.full((50, 10, 12, 2), -1.0, "float32")
        corrupted = corruptions.pixel_corruption(images, fraction, seed=1)
        changed = (corrupted != -1.0).all(axis=-1)  # both channels change
        untouched = (corrupted == -1.0).all(axis=-1)
        self.assertTrue(np.all(changed | untouched))
        self.assertEqual(changed.sum(axis=(1, 2)).tolist(),
                         [round(fraction * 120)] * 50)
        if fraction:
            values = corrupted[changed]
            self.assertTrue(np.all((values >= 0) & (values <= 255)))
            self.assertAllClose(values.mean(), 127.5, atol=6.0)

    @parameterized.parameters(0, 1, 5, 16)
    def test_occlusion_area(self, size):
        images = np.ones((30, 16, 16, 3), "float32")
        occluded = corruptions.occlusion(images, size, seed=2)
        for image in occluded:
            zero = (image == 0).all(axis=-1)
            self.assertEqual(int(zero.sum()), size * size)
            self.assertEqual(int((image == 0).sum()), 3 * size * size)
            if size:
                rows, cols = np.nonzero(zero)
                self.assertEqual(rows.max() - rows.min() + 1, size)
                self.assertEqual(cols.max() - cols.min() + 1, size)

    @parameterized.named_parameters(
        ("noise_high", "noise", 1.5, ValueError, r"\[0, 1\]"),
        ("pixels_negative", "pixels", -0.1, ValueError, r"\[0, 1\]"),
        ("noise_type", "noise", "0.1", TypeError, "number"),
        ("occlusion_big", "occlusion", 17, ValueError, r"\[0, 16\]"),
        ("occlusion_float", "occlusion", 2.5, TypeError, "integer"),
        ("unknown", "blur", 0.1, ValueError, "Unknown corruption"),
    )
    def test_bad_severity(self, kind, severity, error, message):
        with self.assertRaisesRegex(error, message):
            corruptions.check_severity(kind, severity, image_size=16)


class DocstringTest(TestCase):
    def test_examples(self):
        import doctest

        results = doctest.testmod(corruptions, extraglobs={"np": np})
        self.assertGreater(results.attempted, 0)
        self.assertEqual(results.failed, 0)
