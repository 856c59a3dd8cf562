import numpy as np

from keras_caps.layers import PrimaryMatrixCaps
from keras_caps.testing import TestCase
from tests.layers.weight_options import check_regularizers_and_constraints


def _numpy_primary_matrix_caps(x, kernel, bias, num_capsules):
    """The 1x1 convolution per position, written as loops (Hinton et al.

    2018, §5): 16 linear pose entries and a logistic activation per type.
    """
    batch, height, width, _ = x.shape
    out = np.zeros((batch, height, width, num_capsules, 17))
    for b in range(batch):
        for r in range(height):
            for c in range(width):
                z = x[b, r, c] @ kernel + bias  # (num_capsules * 17,)
                for t in range(num_capsules):
                    values = z[17 * t:17 * (t + 1)]
                    out[b, r, c, t, :16] = values[:16]
                    out[b, r, c, t, 16] = 1.0 / (1.0 + np.exp(-values[16]))
    return out


class PrimaryMatrixCapsTest(TestCase):
    def test_layer(self):
        self.run_layer_test(
            PrimaryMatrixCaps, {"num_capsules": 3},
            input_shape=(2, 3, 4, 5),
            expected_output_shape=(2, 3, 4, 3, 17),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=0,
            expected_num_parameters=5 * 3 * 17 + 3 * 17)

    def test_paper_parameter_count(self):
        # smallNORB (§5): 32 channels -> B = 32 types: c B 17 + B 17.
        layer = PrimaryMatrixCaps(32)
        layer.build((None, 14, 14, 32))
        self.assertEqual(layer.count_params(), 32 * 32 * 17 + 32 * 17)
        self.assertEqual(layer.count_params(), 17_952)

    def test_matches_numpy_reference(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 3, 2, 4)).astype("float32")
        layer = PrimaryMatrixCaps(2)
        layer.build(x.shape)
        kernel = rng.normal(size=(4, 34)).astype("float32")
        bias = rng.normal(size=(34,)).astype("float32")
        layer.set_weights([kernel, bias])
        self.assertAllClose(
            layer(x), _numpy_primary_matrix_caps(x, kernel, bias, 2),
            atol=1e-5, rtol=1e-5)

    def test_integer_images(self):
        layer = PrimaryMatrixCaps(2)
        x = np.arange(24, dtype="uint8").reshape(1, 2, 3, 4)
        self.assertAllClose(layer(x), layer(x.astype("float32")))

    def test_bad_input(self):
        with self.assertRaisesRegex(ValueError, "num_capsules"):
            PrimaryMatrixCaps(0)
        with self.assertRaisesRegex(ValueError, "4-D input"):
            PrimaryMatrixCaps(2).build((None, 5, 4))

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, PrimaryMatrixCaps, {"num_capsules": 2},
            np.random.default_rng(2).normal(size=(2, 2, 2, 3)),
            {"kernel": ["kernel"], "bias": ["bias"]})
