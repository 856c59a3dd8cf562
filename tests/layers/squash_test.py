import numpy as np
from absl.testing import parameterized

from keras_caps.layers import Squash
from keras_caps.testing import TestCase


def _numpy_squash(s, variant, epsilon=1e-7):
    norm = np.sqrt(np.sum(s.astype("float64")**2, axis=-1, keepdims=True)
                   + epsilon)
    if variant == "efficient":
        scale = (1.0 - np.exp(-norm)) / norm
    else:
        scale = norm**2 / (1.0 + norm**2) / norm
    return (s * scale).astype("float32")


class SquashTest(TestCase):
    @parameterized.named_parameters(("efficient", "efficient"),
                                    ("sabour", "sabour"))
    def test_layer(self, variant):
        s = 3.0 * np.random.default_rng(0).normal(
            size=(2, 5, 4)).astype("float32")
        self.run_layer_test(
            Squash, {"variant": variant}, input_data=s,
            expected_output_shape=(2, 5, 4),
            expected_output=_numpy_squash(s, variant),
            expected_num_trainable_weights=0,
            expected_num_non_trainable_weights=0)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "`variant`.*Received"):
            Squash(variant="hinton")
        with self.assertRaisesRegex(ValueError, "`epsilon`.*Received"):
            Squash(epsilon=0.0)
