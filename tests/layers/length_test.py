import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import Length
from keras_caps.testing import TestCase


class LengthTest(TestCase):
    def test_layer(self):
        v = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
        self.run_layer_test(
            Length, {}, input_data=v, expected_output_shape=(2, 3),
            expected_output=np.sqrt(np.sum(v**2, axis=-1) + 1e-7),
            expected_num_trainable_weights=0,
            expected_num_non_trainable_weights=0)

    def test_integer_capsules_give_the_float_lengths(self):
        v = np.array([[[3, 4], [0, 0]], [[1, 2], [-6, 8]]], dtype="int32")
        lengths = Length()(v)
        self.assertEqual(keras.backend.standardize_dtype(lengths.dtype),
                         "float32")
        self.assertAllClose(lengths, np.sqrt(np.sum(
            v.astype("float64")**2, axis=-1) + 1e-7), atol=1e-6)

    def test_float32_head_under_mixed_precision(self):
        keras.config.set_dtype_policy("mixed_float16")
        inputs = keras.Input((3, 4))
        lengths = Length(dtype="float32")(keras.layers.Dense(4)(inputs))
        self.assertEqual(lengths.dtype, "float32")

    @parameterized.named_parameters(
        ("negative", -1.0, ValueError), ("string", "1e-7", TypeError))
    def test_bad_epsilon(self, epsilon, error):
        with self.assertRaisesRegex(error, "`epsilon`.*Received: epsilon="):
            Length(epsilon=epsilon)

    def test_bad_rank(self):
        with self.assertRaisesRegex(ValueError, "min_ndim=2"):
            Length()(keras.KerasTensor((None,)))
