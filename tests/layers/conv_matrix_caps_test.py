import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import ConvMatrixCaps
from keras_caps.layers import conv_matrix_caps
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import function_gradients
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import conv_matrix_caps_reference as reference


def matrix_capsules(rng, shape, low=0.05):
    """Matrix capsules `shape + (17,)`: normal poses, activations in (0, 1)."""
    capsules = rng.normal(size=(*shape, 17))
    capsules[..., 16] = rng.uniform(low, 1.0, size=shape)
    return capsules.astype("float32")


def hand_set(layer, rng):
    """Draws the layer's weights; returns them as float64 arrays."""
    kernel = rng.normal(scale=0.5, size=layer.kernel.shape)
    beta_u = rng.normal(scale=0.5, size=layer.beta_u.shape)
    beta_a = rng.normal(scale=0.5, size=layer.beta_a.shape)
    for variable, value in ((layer.kernel, kernel), (layer.beta_u, beta_u),
                            (layer.beta_a, beta_a)):
        variable.assign(value.astype("float32"))
    return kernel, beta_u, beta_a


def numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(
        keras.ops.cast(value, "float32")), dtype="float64")


def check_against_reference(test, kernel_size, strides, schedule,
                            temperature):
    """The layer's outputs and every pass's couplings against the reference."""
    rng = np.random.default_rng(len(schedule))
    capsules = matrix_capsules(rng, (2, 5, 5, 2))
    layer = ConvMatrixCaps(2, kernel_size=kernel_size, strides=strides,
                           num_iterations=len(schedule),
                           inverse_temperatures=schedule,
                           temperature=temperature)
    layer.build(capsules.shape)
    kernel, beta_u, beta_a = hand_set(layer, rng)
    expected, expected_couplings = reference.conv_em_routing(
        capsules, kernel, beta_u, beta_a, layer.strides, schedule,
        layer.epsilon, temperature)
    trace = layer.routing_trace(capsules)
    outputs, couplings = layer(capsules, return_couplings=True)
    test.assertAllClose(numpy(outputs), expected, atol=2e-4, rtol=2e-4)
    test.assertEqual(len(trace["couplings"]), len(schedule))
    for ours, theirs in zip(trace["couplings"], expected_couplings):
        test.assertAllClose(numpy(ours), theirs, atol=1e-5, rtol=1e-4)
    test.assertAllClose(numpy(couplings), expected_couplings[-1],
                        atol=1e-5, rtol=1e-4)


class ConvMatrixCapsTest(TestCase):
    def test_layer(self):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            ConvMatrixCaps,
            {"num_capsules": 2, "kernel_size": 3, "strides": 2},
            input_data=matrix_capsules(rng, (2, 5, 5, 2)),
            expected_output_shape=(2, 2, 2, 2, 17),
            expected_num_trainable_weights=3,  # kernel, beta_u, beta_a
            expected_num_non_trainable_weights=1,  # temperature
            # K * K * B * C 4x4 transforms, beta_u and beta_a per type.
            expected_num_parameters=3 * 3 * 2 * 2 * 16 + 2 + 2,
            # One `fit` step on TensorFlow and PyTorch: JAX compiles the
            # whole routing graph for it (minutes on a 2-core machine); the
            # gradients are checked on every backend (zero inputs, mixed
            # precision, test_zero_activation_children_are_finite).
            run_training_check=keras.backend.backend() != "jax")

    # The routing against the reference on two geometries shared with the
    # other tests (JAX compiles each op once per shape): a child in up to
    # 4 windows (stride 2) or 9 (stride 1).
    @parameterized.named_parameters(
        ("strides_2", 3, 2, (0.25, 0.5, 1.0), 1.0),
        ("strides_1_tempered", 3, 1, (0.5, 1.0, 1.0), 0.5),
    )
    def test_matches_numpy_reference(self, kernel_size, strides, schedule,
                                     temperature):
        check_against_reference(self, kernel_size, strides, schedule,
                                temperature)

    def test_gradients_match_finite_differences_of_the_reference(self):
        """The backend's gradients of the summed outputs against central
        differences of the float64 NumPy reference, for input entries and
        transform entries (the votes' separate handles must not change
        them)."""
        rng = np.random.default_rng(7)
        schedule = (0.5, 1.0)
        capsules = matrix_capsules(rng, (1, 5, 5, 2))
        layer = ConvMatrixCaps(2, kernel_size=3, strides=2, num_iterations=2,
                               inverse_temperatures=schedule)
        layer.build(capsules.shape)
        kernel, beta_u, beta_a = hand_set(layer, rng)
        _, (input_gradient, kernel_gradient, *_) = value_and_gradients(
            layer, capsules)

        def reference_sum(inputs, transforms):
            outputs, _ = reference.conv_em_routing(
                inputs, transforms, beta_u, beta_a, layer.strides, schedule,
                layer.epsilon)
            return outputs.sum()

        def central_difference(array, index, evaluate, step=1e-4):
            plus, minus = array.copy(), array.copy()
            plus[index] += step
            minus[index] -= step
            return (evaluate(plus) - evaluate(minus)) / (2 * step)

        # float32 routing against float64 differences: they agree to about
        # 1e-6 here; 1e-4 leaves room for other backends' op orders.
        capsules64 = capsules.astype("float64")
        for flat in rng.choice(capsules.size, 8, replace=False):
            index = np.unravel_index(flat, capsules.shape)
            if index[-1] == 16:  # Activations stay inside (0, 1).
                continue
            expected = central_difference(
                capsules64, index, lambda x: reference_sum(x, kernel))
            self.assertAllClose(input_gradient[index], expected,
                                atol=1e-4 * (1 + abs(expected)))
        for flat in rng.choice(kernel.size, 6, replace=False):
            index = np.unravel_index(flat, kernel.shape)
            expected = central_difference(
                kernel, index, lambda k: reference_sum(capsules64, k))
            self.assertAllClose(kernel_gradient[index], expected,
                                atol=1e-4 * (1 + abs(expected)))

    def test_couplings_sum_to_one_per_child_not_per_window(self):
        capsules = matrix_capsules(np.random.default_rng(1), (2, 5, 5, 2))
        layer = ConvMatrixCaps(2, kernel_size=3)
        _, couplings = layer(capsules, return_couplings=True)
        couplings = numpy(couplings)[:, 0]  # (batch, rows, parents)
        children = layer.couplings_children(capsules.shape)
        self.assertEqual(layer.couplings_grid(capsules.shape), (3, 3))
        self.assertEqual(children.shape, (couplings.shape[1],))
        per_child = np.zeros((2, 5 * 5 * 2))
        np.add.at(per_child, (slice(None), children), couplings.sum(-1))
        self.assertAllClose(per_child, np.ones_like(per_child), atol=1e-5)
        # The centre child (2, 2) lies in all 9 windows, a corner in one.
        counts = np.bincount(children, minlength=50).reshape(5, 5, 2)
        self.assertEqual(counts[2, 2, 0], 9)
        self.assertEqual(counts[0, 0, 1], 1)
        self.assertFalse(np.allclose(couplings.sum(-1), 1.0, atol=1e-3))

    @parameterized.named_parameters(
        ("float32", "float32"), ("mixed_float16", "mixed_float16"),
        ("mixed_bfloat16", "mixed_bfloat16"))
    def test_zero_activation_children_are_finite(self, policy):
        capsules = matrix_capsules(np.random.default_rng(2), (2, 5, 5, 2))
        capsules[0, ..., 16] = 0.0  # an example whose children are all off
        capsules[1, :, :, 1, 16] = 0.0  # a child type off everywhere
        capsules[1, 1:4, 1:4, 0, 16] = 0.0  # a whole window off
        layer = ConvMatrixCaps(2, kernel_size=3, strides=2, dtype=policy)
        outputs, gradients = value_and_gradients(layer, capsules)
        self.assertAllFinite(numpy(outputs), "outputs")
        self.assertAllFinite(gradients, "gradients")
        trace = layer.routing_trace(capsules)
        for couplings in trace["couplings"]:
            self.assertAllFinite(numpy(couplings), "couplings")

    def test_window_products_have_the_gradients_of_autodiff(self):
        """The hand-written backward passes of the M-step moments and the
        E-step quadratic against autodiff of the plain products (the
        squares an input without gradient, as in the layer)."""
        rng = np.random.default_rng(3)
        votes = rng.normal(size=(2, 3, 5, 16)).astype("float32")
        shares = rng.uniform(size=(2, 3, 1, 5)).astype("float32")
        inverse = rng.uniform(0.5, 2.0, size=(2, 3, 16)).astype("float32")
        scaled = rng.normal(size=(2, 3, 16)).astype("float32")
        # Weights, so that every output entry has its own upstream value.
        moment_weights = keras.ops.convert_to_tensor(
            rng.normal(size=(2, 3, 2, 16)).astype("float32"))
        quadratic_weights = keras.ops.convert_to_tensor(
            rng.normal(size=(2, 3, 5)).astype("float32"))
        ops = keras.ops

        def moments(v, s, hand_written):
            if hand_written:
                result = conv_matrix_caps._window_moments(
                    v, ops.stop_gradient(ops.square(v)), s)
            else:
                result = ops.concatenate([ops.matmul(s, v),
                                          ops.matmul(s, ops.square(v))], -2)
            return result * moment_weights

        def quadratic(v, i, m, hand_written):
            if hand_written:
                result = conv_matrix_caps._window_quadratic(
                    v, ops.stop_gradient(ops.square(v)), i, m)
            else:
                result = ops.sum(ops.square(v) * i[..., None, :]
                                 - 2.0 * v * m[..., None, :], axis=-1)
            return result * quadratic_weights

        for fn, args in ((moments, (votes, shares)),
                         (quadratic, (votes, inverse, scaled))):
            ours, our_gradients = function_gradients(
                lambda *a, f=fn: f(*a, hand_written=True), *args)
            theirs, their_gradients = function_gradients(
                lambda *a, f=fn: f(*a, hand_written=False), *args)
            self.assertAllClose(numpy(ours), numpy(theirs), atol=1e-5,
                                rtol=1e-6)
            for mine, expected in zip(our_gradients, their_gradients):
                self.assertAllClose(mine, expected, atol=1e-5, rtol=1e-6)

    @pytest.mark.single_backend
    def test_parameters_of_the_paper_conv_caps(self):
        # smallNORB ConvCaps1 (Hinton et al. 2018, Section 5): K = 3,
        # B = C = 32 on the 14x14 primary grid: 3 * 3 * 32 * 32 * 16
        # transform entries plus beta_u and beta_a per parent type.
        layer = ConvMatrixCaps(32, kernel_size=3, strides=2)
        layer.build((None, 14, 14, 32, 17))
        trainable = sum(int(np.prod(w.shape)) for w in layer.trainable_weights)
        self.assertEqual(trainable, 147_456 + 64)
        self.assertEqual(layer.count_params(), trainable + 1)  # temperature
        self.assertEqual(layer.compute_output_shape((None, 14, 14, 32, 17)),
                         (None, 6, 6, 32, 17))

    @pytest.mark.single_backend
    def test_bad_input(self):
        layer = ConvMatrixCaps(2, kernel_size=4)
        with self.assertRaisesRegex(ValueError, "`kernel_size`.*3x3"):
            layer.build((None, 3, 3, 2, 17))
        with self.assertRaisesRegex(ValueError, "`inputs`.*17.*16"):
            ConvMatrixCaps(2).build((None, 5, 5, 2, 16))
        with self.assertRaisesRegex(ValueError, "`num_iterations`"):
            ConvMatrixCaps(2, num_iterations=0)
        with self.assertRaisesRegex(ValueError, "`inverse_temperatures`"):
            ConvMatrixCaps(2, num_iterations=3,
                           inverse_temperatures=(1.0, 0.5, 2.0))
        with self.assertRaisesRegex(ValueError, "`inverse_temperatures`"):
            ConvMatrixCaps(2, num_iterations=2,
                           inverse_temperatures=(1.0, 2.0, 3.0))
        with self.assertRaisesRegex(ValueError, "`epsilon`"):
            ConvMatrixCaps(2, epsilon=0.0)
        with self.assertRaisesRegex(ValueError, "`kernel_size`"):
            ConvMatrixCaps(2, kernel_size=(3, 3, 3))


@pytest.mark.single_backend
class ConvMatrixCapsWindowsTest(TestCase):
    """More window layouts; the maths is the same code on every backend."""

    @parameterized.named_parameters(
        # A child in up to 4 windows, the last row and column in none.
        ("kernel_2_strides_2_uncovered", 2, 2, (1.0, 1.0, 2.0), 1.0),
        ("rectangular", (3, 2), (1, 2), (0.5, 1.0), 1.0),
    )
    def test_matches_numpy_reference(self, kernel_size, strides, schedule,
                                     temperature):
        check_against_reference(self, kernel_size, strides, schedule,
                                temperature)
