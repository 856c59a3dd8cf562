import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.ops import compose_credit_assignments
from keras_caps.testing import TestCase
from tests.layers import vector_routing_reference as reference


class ComposeCreditAssignmentsTest(TestCase):
    @parameterized.named_parameters(("one", 1), ("two", 2), ("three", 3))
    def test_matches_reference_chain(self, num_routings):
        rng = np.random.default_rng(num_routings)
        sizes = [7, 5, 4, 3][:num_routings + 1]
        phis = [rng.normal(size=(2, a, b)).astype("float32")
                for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        composed = compose_credit_assignments(phis)
        self.assertEqual(tuple(composed.shape), (2, sizes[0], sizes[-1]))
        self.assertAllClose(composed,
                            reference.compose_credit_assignments(phis),
                            atol=1e-5, rtol=1e-5)
        # Unit standard deviation per example.
        self.assertAllClose(np.std(keras.ops.convert_to_numpy(composed),
                                   axis=(1, 2)), 1.0, atol=1e-3)

    def test_per_example_and_batch_independent(self):
        rng = np.random.default_rng(0)
        phi_1 = rng.normal(size=(3, 6, 4)).astype("float32")
        phi_2 = rng.normal(size=(3, 4, 2)).astype("float32")
        phi_1[1] *= 100.0  # another example's scale must not matter
        batch = compose_credit_assignments([phi_1, phi_2])
        single = compose_credit_assignments([phi_1[:1], phi_2[:1]])
        self.assertAllClose(keras.ops.convert_to_numpy(batch)[:1], single,
                            atol=1e-6)

    def test_zero_credit_stays_zero_and_finite(self):
        phi_1 = np.zeros((2, 5, 3), "float32")
        phi_1[0, :2] = 1.0
        phi_2 = np.ones((2, 3, 2), "float32")
        composed = keras.ops.convert_to_numpy(
            compose_credit_assignments([phi_1, phi_2]))
        self.assertAllFinite(composed)
        self.assertAllClose(composed[0, 2:], 0.0)
        self.assertAllClose(composed[1], 0.0)

    def test_half_precision(self):
        rng = np.random.default_rng(1)
        phis = [rng.normal(size=(2, 300, 64)).astype("float16") * 50,
                rng.normal(size=(2, 64, 10)).astype("float16") * 50]
        composed = compose_credit_assignments(phis)
        self.assertEqual(keras.backend.standardize_dtype(composed.dtype),
                         "float16")
        self.assertAllFinite(composed)
        self.assertAllClose(
            keras.ops.cast(composed, "float32"),
            reference.compose_credit_assignments(
                [p.astype("float32") for p in phis]), atol=1e-2, rtol=1e-2)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError,
                                    "non-empty.*Received: credit_assignments"):
            compose_credit_assignments([])
        with self.assertRaisesRegex(ValueError, "Received: credit_assignments"):
            compose_credit_assignments(np.ones((2, 3, 3)))
        with self.assertRaisesRegex(
                ValueError, "4 outputs.*5 inputs.*Received: shapes="):
            compose_credit_assignments([np.ones((2, 3, 4)),
                                        np.ones((2, 5, 2))])
        with self.assertRaisesRegex(
                ValueError, "Received: credit_assignments\\[0\\].shape"):
            compose_credit_assignments([np.ones((3,))])
        with self.assertRaisesRegex(ValueError, "Received: epsilon=-1"):
            compose_credit_assignments([np.ones((2, 3, 4))], epsilon=-1.0)
