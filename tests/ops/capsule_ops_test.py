import keras
import numpy as np
from absl.testing import parameterized
from keras import ops

from keras_caps import ops as capsule_ops
from keras_caps.testing import TestCase
from keras_caps.testing import function_gradients

DTYPES = ("float32", "float16", "bfloat16")


def numpy_squash(s, variant):
    """The squash of Mazzia et al. 2021 or of Sabour et al. 2017 (Eq. 1).

    Without any epsilon, as the papers write them.
    """
    norm = np.linalg.norm(s, axis=-1, keepdims=True)
    if variant == "efficient":
        return (1.0 - np.exp(-norm)) * s / norm
    return norm**2 / (1.0 + norm**2) * s / norm


def to_float32(x):
    return ops.convert_to_numpy(ops.cast(x, "float32"))


class SquashTest(TestCase):
    @parameterized.product(variant=("efficient", "sabour"))
    def test_matches_numpy_reference(self, variant):
        rng = np.random.default_rng(1)
        # Norms from 1e-2 to 1e2, where the relative error of the epsilon
        # is below 1e-4 (about epsilon / (4 |s|): 2.5e-6 at |s| = 0.01).
        s = rng.normal(size=(4, 6, 8)) * np.logspace(-2, 2, 6)[:, None]
        actual = capsule_ops.squash(s.astype("float32"), variant=variant)
        self.assertAllClose(actual, numpy_squash(s, variant), rtol=1e-4,
                            atol=1e-7)

    def test_length_is_below_one_and_direction_kept(self):
        s = np.array([[3.0, 4.0], [-0.3, 0.4]], dtype="float32")
        v = to_float32(capsule_ops.squash(s))
        norms = np.linalg.norm(v, axis=-1)
        self.assertAllClose(norms, 1.0 - np.exp(-np.array([5.0, 0.5])),
                            rtol=1e-5)
        self.assertAllClose(v / norms[:, None], s / np.linalg.norm(
            s, axis=-1, keepdims=True), rtol=1e-5)

    def test_axis(self):
        s = np.random.default_rng(2).normal(size=(3, 8, 5)).astype("float32")
        actual = capsule_ops.squash(s, axis=1)
        expected = np.moveaxis(numpy_squash(np.moveaxis(s, 1, -1),
                                            "efficient"), -1, 1)
        self.assertAllClose(actual, expected, rtol=1e-4)

    @parameterized.product(variant=("efficient", "sabour"), dtype=DTYPES)
    def test_zero_vector_finite_value_and_gradient(self, variant, dtype):
        zeros = ops.zeros((2, 4), dtype=dtype)
        outputs, (gradient,) = function_gradients(
            lambda x: capsule_ops.squash(x, variant=variant), zeros)
        self.assertEqual(keras.backend.standardize_dtype(outputs.dtype),
                         dtype)
        self.assertAllClose(to_float32(outputs), np.zeros((2, 4)))
        self.assertAllFinite(gradient)
        # d squash / d s at 0: ~identity (efficient), ~0 (Sabour). The
        # gradient of the sum is the row sum of the Jacobian.
        expected = 1.0 if variant == "efficient" else 0.0
        self.assertAllClose(gradient, np.full((2, 4), expected), atol=1e-2)

    @parameterized.product(dtype=DTYPES)
    def test_huge_values_give_unit_vectors(self, dtype):
        huge = {"float32": 1e15, "float16": 6e4, "bfloat16": 1e30}[dtype]
        s = ops.cast(np.array([[huge, -huge, 0.0]]), dtype)
        v = to_float32(capsule_ops.squash(s))
        self.assertAllFinite(v)
        self.assertAllClose(v, [[0.7071, -0.7071, 0.0]], atol=1e-2)
        sabour = to_float32(capsule_ops.squash(s, variant="sabour"))
        self.assertAllFinite(sabour)

    def test_half_precision_matches_float32(self):
        s = np.random.default_rng(3).normal(size=(5, 8)).astype("float32")
        reference = to_float32(capsule_ops.squash(s))
        for dtype, tolerance in (("float16", 2e-3), ("bfloat16", 2e-2)):
            actual = to_float32(capsule_ops.squash(ops.cast(s, dtype)))
            self.assertAllClose(actual, reference, atol=tolerance,
                                rtol=tolerance)

    def test_unknown_variant(self):
        with self.assertRaisesRegex(ValueError, "`variant`.*'hinton'"):
            capsule_ops.squash(np.ones((1, 2)), variant="hinton")

    def test_negative_epsilon(self):
        with self.assertRaisesRegex(ValueError, "`epsilon`.*-1"):
            capsule_ops.squash(np.ones((1, 2)), epsilon=-1.0)
        with self.assertRaisesRegex(TypeError, "`epsilon`"):
            capsule_ops.squash(np.ones((1, 2)), epsilon="small")


class NormTest(TestCase):
    def test_capsule_length_matches_numpy(self):
        v = np.random.default_rng(4).normal(size=(2, 3, 4)).astype("float32")
        expected = np.sqrt(np.sum(v**2, axis=-1) + 1e-7)
        self.assertAllClose(capsule_ops.capsule_length(v), expected,
                            rtol=1e-6)
        self.assertAllClose(capsule_ops.safe_norm(v, axis=1, keepdims=True),
                            np.sqrt(np.sum(v**2, axis=1, keepdims=True)
                                    + 1e-7), rtol=1e-6)

    @parameterized.product(dtype=DTYPES)
    def test_zero_capsule_length_and_gradient(self, dtype):
        zeros = ops.zeros((2, 3, 4), dtype=dtype)
        lengths, (gradient,) = function_gradients(
            capsule_ops.capsule_length, zeros)
        self.assertEqual(keras.backend.standardize_dtype(lengths.dtype),
                         dtype)
        # sqrt(1e-7) survives float16 because the sum is taken in float32.
        self.assertAllClose(to_float32(lengths),
                            np.full((2, 3), np.sqrt(1e-7)), rtol=1e-2)
        self.assertAllClose(gradient, np.zeros((2, 3, 4)))


class CapsuleVotesTest(TestCase):
    def test_votes_and_gradients_match_numpy(self):
        # votes[b, j, i] = u[b, i] @ W[i, :, j] (Sabour et al., 2017, Eq. 2),
        # written as loops; the gradients of their sum in closed form.
        rng = np.random.default_rng(5)
        children = rng.normal(size=(2, 3, 4)).astype("float32")
        kernel = rng.normal(size=(3, 4, 5, 6)).astype("float32")
        expected = np.zeros((2, 5, 3, 6))
        for b in range(2):
            for i in range(3):
                for j in range(5):
                    expected[b, j, i] = children[b, i] @ kernel[i, :, j]
        votes, (d_children, d_kernel) = function_gradients(
            capsule_ops.capsule_votes, children, kernel)
        self.assertAllClose(votes, expected, rtol=1e-5, atol=1e-5)
        # d sum / d u[b, i, d] = sum_(j, z) W[i, d, j, z]
        self.assertAllClose(
            d_children, np.broadcast_to(kernel.sum(axis=(2, 3)), (2, 3, 4)),
            rtol=1e-5, atol=1e-5)
        # d sum / d W[i, d, j, z] = sum_b u[b, i, d]
        self.assertAllClose(
            d_kernel, np.broadcast_to(children.sum(axis=0)[:, :, None, None],
                                      (3, 4, 5, 6)), rtol=1e-5, atol=1e-5)

    @parameterized.product(dtype=("float16", "bfloat16"))
    def test_votes_take_the_children_dtype(self, dtype):
        votes = capsule_ops.capsule_votes(ops.ones((2, 3, 4), dtype=dtype),
                                          np.ones((3, 4, 5, 6), "float32"))
        self.assertEqual(keras.backend.standardize_dtype(votes.dtype), dtype)
        self.assertAllClose(to_float32(votes), np.full((2, 5, 3, 6), 4.0))

    def test_children_that_do_not_fit_the_kernel(self):
        with self.assertRaisesRegex(ValueError, r"children \(batch, 3, 4\)"
                                    r".*children.shape=\(2, 3, 5\)"):
            capsule_ops.capsule_votes(np.ones((2, 3, 5), "float32"),
                                      np.ones((3, 4, 5, 6), "float32"))
        with self.assertRaisesRegex(ValueError,
                                    r"kernel.shape=\(3, 4, 30\)"):
            capsule_ops.capsule_votes(np.ones((2, 3, 4), "float32"),
                                      np.ones((3, 4, 30), "float32"))


class MaskOpsTest(TestCase):
    def test_mask_by_label(self):
        capsules = np.arange(12, dtype="float32").reshape(1, 3, 4)
        masked = ops.convert_to_numpy(
            capsule_ops.mask_by_label(capsules, np.array([[0, 0, 1]])))
        expected = np.zeros_like(capsules)
        expected[0, 2] = capsules[0, 2]
        self.assertAllClose(masked, expected)

    def test_mask_by_length_single_and_ordered_top_k(self):
        capsules = np.zeros((2, 4, 2), dtype="float32")
        capsules[0, :, 0] = [0.1, 0.9, 0.5, 0.2]
        capsules[1, :, 1] = [0.7, 0.1, 0.2, 0.8]
        single = ops.convert_to_numpy(capsule_ops.mask_by_length(capsules))
        self.assertAllClose(np.linalg.norm(single, axis=-1),
                            [[0, 0.9, 0, 0], [0, 0, 0, 0.8]])
        pair = ops.convert_to_numpy(
            capsule_ops.mask_by_length(capsules, num_masks=2))
        self.assertEqual(pair.shape, (2, 2, 4, 2))
        # First mask: longest capsule; second mask: second longest.
        self.assertAllClose(np.linalg.norm(pair, axis=-1),
                            [[[0, 0.9, 0, 0], [0, 0, 0.5, 0]],
                             [[0, 0, 0, 0.8], [0.7, 0, 0, 0]]])

    def test_mask_by_length_keeps_the_first_of_tied_longest(self):
        # As NumPy's argmax: among capsules of equal length (all-zero ones
        # included) the first is kept, exactly one per example.
        capsules = np.zeros((3, 4, 2), dtype="float32")
        capsules[0, 1] = capsules[0, 3] = [0.6, 0.8]
        capsules[1, 2] = [0.0, 1.0]
        capsules[1, 3] = [1.0, 0.0]
        masked = ops.convert_to_numpy(capsule_ops.mask_by_length(capsules))
        expected = np.zeros_like(capsules)
        for example, index in enumerate(
                np.argmax(np.linalg.norm(capsules, axis=-1), axis=-1)):
            expected[example, index] = capsules[example, index]
        self.assertAllClose(masked, expected)
        self.assertEqual(np.argmax(np.linalg.norm(capsules, axis=-1),
                                   axis=-1).tolist(), [1, 2, 0])

    def test_mask_by_length_bad_num_masks(self):
        with self.assertRaisesRegex(ValueError, "`num_masks`.*5"):
            capsule_ops.mask_by_length(np.ones((1, 3, 2)), num_masks=5)
        with self.assertRaisesRegex(TypeError, "`num_masks`"):
            capsule_ops.mask_by_length(np.ones((1, 3, 2)), num_masks=1.5)
