import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.ops import entmax15
from keras_caps.ops import gumbel_noise
from keras_caps.ops import one_hot_argmax
from keras_caps.ops import sparsemax
from keras_caps.ops import straight_through_gumbel_softmax
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import function_gradients
from tests.ops import sparse_couplings_reference as reference

SPARSE = {"sparsemax": (sparsemax, reference.sparsemax,
                        reference.sparsemax_jacobian),
          "entmax15": (entmax15, reference.entmax15,
                       reference.entmax15_jacobian)}


# One shape for (nearly) every test: JAX compiles each operation per shape.
SHAPE = (3, 4, 5)


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype="float64")


def _scores(seed, shape=SHAPE, scale=2.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.normal(size=shape)).astype("float32")


def _jacobian(function, z):
    """The Jacobian of `function` at the 1-D `z`, row by row by autodiff."""
    rows = []
    for index in range(len(z)):
        weights = keras.ops.convert_to_tensor(
            np.eye(len(z), dtype="float32")[index])
        _, (gradient,) = function_gradients(
            lambda x, w=weights: function(x) * w, z)
        rows.append(gradient)
    return np.stack(rows)


def _finite_difference_jacobian(function, z, step=1e-2):
    columns = []
    for index in range(len(z)):
        shift = np.eye(len(z), dtype="float32")[index] * step
        columns.append((_numpy(function(z + shift))
                        - _numpy(function(z - shift))) / (2 * step))
    return np.stack(columns, axis=1)


class SparseCouplingsTest(TestCase):
    @parameterized.named_parameters(
        (f"{name}_axis{axis}", name, axis) for name in SPARSE
        for axis in (-1, 1))
    def test_matches_sorting_reference(self, name, axis):
        function, expected_function, _ = SPARSE[name]
        scores = _scores(1)
        outputs = _numpy(function(scores, axis=axis))
        expected = reference.along_axis(expected_function, scores, axis)
        self.assertAllClose(outputs, expected, atol=2e-6)
        self.assertAllClose(outputs.sum(axis=axis), 1.0, atol=2e-6)
        self.assertGreaterEqual(outputs.min(), 0.0)
        # Exact zeros where the reference has them (and only there).
        np.testing.assert_array_equal(outputs == 0.0, expected == 0.0)
        self.assertGreater(np.mean(outputs == 0.0), 0.2)

    def test_entmax_reference_agrees_with_its_definition(self):
        for z in _scores(2, shape=(6, 7)):
            self.assertAllClose(reference.entmax15(z),
                                reference.entmax15_by_bisection(z),
                                atol=1e-9)

    def test_known_values(self):
        # Vectors of 5, as in `test_jacobian` (one compilation on JAX).
        self.assertAllClose(
            _numpy(sparsemax(np.array([1.0, 0.8, -1.0, -2.0, -3.0]))),
            [0.6, 0.4, 0.0, 0.0, 0.0], atol=1e-6)
        # A tie gives the same share; far below the others gives 0.
        self.assertAllClose(
            _numpy(sparsemax(np.array([0.0, 0.0, -5.0, -6.0, -7.0]))),
            [0.5, 0.5, 0.0, 0.0, 0.0], atol=1e-6)
        for function in (sparsemax, entmax15):
            # One dominant score: one-hot; equal scores: uniform.
            self.assertAllClose(
                _numpy(function(np.array([9.0, 0.0, 1.0, 0.0, 0.0]))),
                [1.0, 0.0, 0.0, 0.0, 0.0], atol=1e-6)
            self.assertAllClose(_numpy(function(np.zeros(5))),
                                np.full(5, 0.2), atol=1e-6)

    def test_entmax_is_denser_than_sparsemax(self):
        scores = _scores(3, scale=1.0)
        sparse_zeros = np.mean(_numpy(sparsemax(scores)) == 0.0)
        entmax_zeros = np.mean(_numpy(entmax15(scores)) == 0.0)
        self.assertGreater(sparse_zeros, entmax_zeros)
        self.assertGreater(entmax_zeros, 0.0)

    @parameterized.named_parameters((name, name) for name in SPARSE)
    def test_jacobian(self, name):
        function, _, expected_jacobian = SPARSE[name]
        z = np.array([0.9, 0.3, -1.8, 0.6, -0.1], "float32")
        outputs = _numpy(function(z))
        # Zeros and a support of several: both parts of the Jacobian.
        self.assertBetween(int(np.sum(outputs == 0.0)), 1, len(z) - 2)
        jacobian = _jacobian(function, z)
        self.assertAllClose(jacobian, expected_jacobian(outputs), atol=1e-5)
        self.assertAllClose(_finite_difference_jacobian(function, z),
                            jacobian, atol=2e-3)

    @parameterized.named_parameters(
        (f"{name}_{dtype}", name, dtype) for name in SPARSE
        for dtype in ("float16", "bfloat16"))
    def test_half_precision_and_extreme_scores(self, name, dtype):
        function, expected_function, _ = SPARSE[name]
        scores = keras.ops.cast(_scores(4, scale=30.0), dtype)
        outputs = function(scores)
        self.assertEqual(keras.backend.standardize_dtype(outputs.dtype),
                         "float32")
        self.assertAllClose(_numpy(outputs).sum(axis=-1), 1.0, atol=1e-5)
        huge = _scores(5)
        huge[0, 0] = [1e30, -1e30, 0.0, 1.0, 2.0]
        huge[0, 1] = [3e5, 3e5, -3e5, 0.0, 1.0]
        outputs = _numpy(function(huge))
        self.assertAllFinite(outputs)
        self.assertAllClose(outputs[0, :2], [[1, 0, 0, 0, 0],
                                             [0.5, 0.5, 0, 0, 0]], atol=1e-6)
        self.assertAllClose(
            outputs[1:], reference.along_axis(expected_function, huge[1:],
                                              -1), atol=2e-6)
        _, (gradient,) = function_gradients(function, huge)
        self.assertAllFinite(gradient)


class GumbelTest(TestCase):
    def test_forward_is_one_hot_at_the_perturbed_argmax(self):
        scores = _scores(5)
        for axis in (-1, 1):
            sample = _numpy(straight_through_gumbel_softmax(
                scores, axis=axis, seed=11))
            np.testing.assert_array_equal(np.unique(sample), [0.0, 1.0])
            self.assertAllClose(sample.sum(axis=axis), 1.0, atol=0.0)
            perturbed = scores + _numpy(gumbel_noise(scores.shape, seed=11))
            np.testing.assert_array_equal(
                sample, reference.one_hot_argmax(perturbed, axis))

    def test_same_seed_same_draw(self):
        scores = _scores(6, scale=0.1)
        first = _numpy(straight_through_gumbel_softmax(scores, seed=4))
        again = _numpy(straight_through_gumbel_softmax(scores, seed=4))
        other = _numpy(straight_through_gumbel_softmax(scores, seed=5))
        np.testing.assert_array_equal(first, again)
        self.assertFalse(np.array_equal(first, other))

    def test_gradient_is_the_soft_samples_gradient(self):
        scores = _scores(7)
        weights = keras.ops.convert_to_tensor(_scores(8))
        noise = _numpy(gumbel_noise(scores.shape, seed=2))

        def hard(x):
            return straight_through_gumbel_softmax(x, seed=2) * weights

        def soft(x):
            perturbed = x + keras.ops.convert_to_tensor(noise, "float32")
            return keras.ops.softmax(perturbed, axis=-1) * weights

        _, (hard_gradient,) = function_gradients(hard, scores)
        _, (soft_gradient,) = function_gradients(soft, scores)
        self.assertAllClose(hard_gradient, soft_gradient, atol=1e-6)
        self.assertGreater(np.abs(hard_gradient).max(), 1e-3)

    def test_half_precision(self):
        scores = keras.ops.cast(_scores(7), "float16")
        sample = straight_through_gumbel_softmax(scores, seed=2)
        self.assertEqual(keras.backend.standardize_dtype(sample.dtype),
                         "float32")
        self.assertAllClose(_numpy(sample).sum(axis=-1), 1.0, atol=0.0)
        _, (gradient,) = function_gradients(
            lambda x: straight_through_gumbel_softmax(x / 1e-3, seed=2),
            scores)
        self.assertAllFinite(gradient)

    def test_samples_follow_the_softmax(self):
        # Gumbel-max: index j with probability softmax(x)_j.
        logits = np.array([1.0, 0.0, -1.0, 0.5], "float32")
        draws = np.broadcast_to(logits, (4000, 4))
        frequency = _numpy(straight_through_gumbel_softmax(
            draws, seed=9)).mean(axis=0)
        self.assertAllClose(frequency, reference.softmax(logits, 0),
                            atol=0.03)

    def test_noise_is_standard_gumbel_and_finite(self):
        noise = _numpy(gumbel_noise((20000,), seed=3))
        self.assertAllFinite(noise)
        self.assertAllClose(noise.mean(), np.euler_gamma, atol=0.04)
        self.assertAllClose(noise.var(), np.pi**2 / 6, atol=0.1)

    def test_one_hot_argmax_breaks_ties_to_the_first(self):
        hard = _numpy(one_hot_argmax(np.array([[0.0, 0.0, 0.0],
                                               [1.0, 3.0, 3.0]]), axis=-1))
        np.testing.assert_array_equal(hard, [[1, 0, 0], [0, 1, 0]])
        hard = _numpy(one_hot_argmax(np.array([[0.0, 2.0], [1.0, 1.0]]),
                                     axis=0))
        np.testing.assert_array_equal(hard, [[0, 1], [1, 0]])
