import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import EMRouting
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import em_routing_reference as reference
from tests.layers.weight_options import check_regularizers_and_constraints


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64")


def _matrix_capsules(rng, shape):
    """Matrix capsules: poses of scale 0.5, activations in (0.1, 1)."""
    capsules = rng.normal(size=(*shape, 17)) * 0.5
    capsules[..., 16] = rng.uniform(0.1, 1.0, size=shape)
    return capsules.astype("float32")


def _set_weights(layer, rng):
    """Hand-set transforms and betas; returns them in float64."""
    kernel = rng.normal(size=tuple(layer.kernel.shape)) * 0.7
    beta_u = rng.normal(size=layer.num_capsules) * 0.3
    beta_a = rng.normal(size=layer.num_capsules) * 0.3
    layer.kernel.assign(kernel.astype("float32"))
    layer.beta_u.assign(beta_u.astype("float32"))
    layer.beta_a.assign(beta_a.astype("float32"))
    return [w.astype("float32").astype("float64")
            for w in (kernel, beta_u, beta_a)]


class EMRoutingLayerTest(TestCase):
    # The grid with coordinate addition gets every check (its votes are not
    # 0 for all-zero inputs); the router contract test covers the other
    # forms under mixed precision too. The tests share a few shapes (grid
    # (2, 2, 3, 2), flat (2, 5), vectors (2, 4, 3), 3 parents), so JAX
    # compiles each op once.
    @parameterized.named_parameters(
        ("grid_coordinates", {"coordinate_addition": True},
         (2, 2, 3, 2, 17), (2, 3, 17), 2 * 3 * 16 + 6, True),
        ("matrix", {}, (2, 5, 17), (2, 3, 17), 5 * 3 * 16 + 6, False),
        ("vectors", {"capsule_dim": 5, "input_kind": "vector",
                     "data_scale": "auto", "num_iterations": 2},
         (2, 4, 3), (2, 3, 5), 4 * 3 * 3 * 5 + 6, False),
    )
    def test_layer(self, options, input_shape, output_shape, parameters,
                   mixed_precision):
        self.run_layer_test(
            EMRouting, {"num_capsules": 3, **options},
            input_shape=input_shape, expected_output_shape=output_shape,
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=1,
            expected_num_parameters=parameters,
            run_mixed_precision_check=mixed_precision)

    def test_paper_class_capsule_parameters(self):
        # smallNORB's class capsules (§5): 32 types -> 5 classes.
        layer = EMRouting(5, coordinate_addition=True)
        layer.build((None, 4, 4, 32, 17))
        self.assertEqual(tuple(layer.kernel.shape), (32, 5, 4, 4))
        self.assertEqual(layer.count_params() - 1, 32 * 5 * 16 + 2 * 5)

    @parameterized.named_parameters(
        ("default_schedule", 3, None, 1.0, 1.0),
        ("schedule_tempered", 3, (0.5, 1.0, 2.0), 0.5, 1.0),
        ("rescaled_data", 2, 0.8, 1.0, "auto"),
    )
    def test_matches_procedure_1(self, iterations, schedule, temperature,
                                 data_scale):
        rng = np.random.default_rng(0)
        x = _matrix_capsules(rng, (2, 5))
        layer = EMRouting(3, num_iterations=iterations,
                          inverse_temperatures=schedule,
                          temperature=temperature, data_scale=data_scale)
        layer.build(x.shape)
        kernel, beta_u, beta_a = _set_weights(layer, rng)
        trace = layer.routing_trace(x)
        outputs = _numpy(layer(x))
        lambdas = layer.inverse_temperatures
        scale = 3 / 5 if data_scale == "auto" else 1.0
        for b in range(2):
            votes = reference.matrix_votes(x[b, :, :16], kernel)
            passes = reference.em_routing(
                votes, x[b, :, 16], beta_u, beta_a, lambdas, 1e-4,
                temperature=temperature, data_scale=scale)
            self.assertLen(trace["couplings"], iterations)
            for t, expected in enumerate(passes):
                self.assertAllClose(_numpy(trace["couplings"][t])[b, 0],
                                    expected["couplings"], atol=5e-5,
                                    rtol=5e-5)
                self.assertAllClose(_numpy(trace["parents"][t])[b, :, 16],
                                    expected["activations"], atol=5e-5,
                                    rtol=5e-5)
            self.assertAllClose(outputs[b, :, :16], passes[-1]["means"],
                                atol=5e-5, rtol=5e-5)
            self.assertAllClose(outputs[b, :, 16], passes[-1]["activations"],
                                atol=5e-5, rtol=5e-5)

    def test_coordinate_addition_by_hand(self):
        # Identity transforms: each vote is the child's pose plus the
        # scaled centre of its cell on the first two entries.
        rng = np.random.default_rng(1)
        x = _matrix_capsules(rng, (2, 2, 3, 2))
        layer = EMRouting(3, coordinate_addition=True)
        layer.build(x.shape)
        layer.kernel.assign(np.broadcast_to(np.eye(4), (2, 3, 4, 4)))
        votes = _numpy(layer.routing_trace(x)["votes"])[0]  # (12, 3, 16)
        # Child (row 1, column 2, type 0) is child 1 * 6 + 2 * 2 + 0 = 10.
        expected = x[0, 1, 2, 0, :16].astype("float64").copy()
        expected[0] += 1.5 / 2  # (row + 0.5) / H
        expected[1] += 2.5 / 3  # (column + 0.5) / W
        self.assertAllClose(votes[10, 1], expected, atol=1e-6)
        kernel = rng.normal(size=(2, 3, 4, 4))
        layer.kernel.assign(kernel.astype("float32"))
        self.assertAllClose(
            _numpy(layer.routing_trace(x)["votes"])[0],
            reference.grid_votes(x[0, ..., :16],
                                 kernel.astype("float32"), True),
            atol=1e-5, rtol=1e-5)
        plain = EMRouting(3)
        plain.build(x.shape)
        plain.kernel.assign(kernel.astype("float32"))
        self.assertAllClose(
            _numpy(plain.routing_trace(x)["votes"])[0],
            reference.grid_votes(x[0, ..., :16],
                                 kernel.astype("float32"), False),
            atol=1e-5, rtol=1e-5)

    def test_vector_capsules_route_with_their_lengths(self):
        rng = np.random.default_rng(2)
        u = rng.normal(size=(2, 4, 3)) * 0.3
        u[0, 1] *= 10.0  # longer than 1: activation 1
        u = u.astype("float32")
        layer = EMRouting(3, 5, input_kind="vector", num_iterations=2)
        layer.build(u.shape)
        kernel, beta_u, beta_a = _set_weights(layer, rng)
        outputs = _numpy(layer(u))
        for b in range(2):
            norms = np.linalg.norm(u[b], axis=-1)
            # The pose is the direction, the activation the length.
            votes = np.einsum("nd,ndmp->nmp", u[b] / norms[:, None], kernel)
            lengths = np.minimum(norms, 1.0)
            last = reference.em_routing(votes, lengths, beta_u, beta_a,
                                        (0.5, 1.0), 1e-4)[-1]
            directions = last["means"] / np.linalg.norm(
                last["means"], axis=-1, keepdims=True)
            self.assertAllClose(
                outputs[b], last["activations"][:, None] * directions,
                atol=5e-5, rtol=5e-5)
        matrix_out = EMRouting(3, 5, input_kind="vector",
                               output_kind="matrix", num_iterations=2)
        self.assertEqual(tuple(matrix_out(u).shape), (2, 3, 6))

    def test_an_inactive_child_is_ignored_and_finite(self):
        rng = np.random.default_rng(3)
        x = _matrix_capsules(rng, (2, 5))
        x[:, 2, 16] = 0.0
        x[:, 2, :16] = 30.0
        layer = EMRouting(3)
        layer.build(x.shape)
        kernel, _, _ = _set_weights(layer, rng)
        for policy in ("float32", "mixed_float16"):
            graded = EMRouting(3, dtype=policy)
            graded.build(x.shape)
            graded.set_weights(layer.get_weights())
            outputs, gradients = value_and_gradients(graded, x)
            self.assertAllFinite(outputs, policy)
            self.assertAllFinite(gradients, policy)
        without = EMRouting(3)
        without.build((None, 4, 17))
        without.set_weights([np.delete(kernel, 2, axis=0).astype("float32"),
                             *layer.get_weights()[1:]])
        self.assertAllClose(layer(x), without(np.delete(x, 2, axis=1)),
                            atol=1e-5, rtol=1e-5)

    def test_all_children_inactive_is_finite(self):
        x = _matrix_capsules(np.random.default_rng(4), (2, 5))
        x[..., 16] = 0.0
        outputs, gradients = value_and_gradients(EMRouting(3), x)
        self.assertAllFinite(outputs)
        self.assertAllFinite(gradients)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "num_iterations"):
            EMRouting(3, num_iterations=0)
        with self.assertRaisesRegex(ValueError, "non-decreasing"):
            EMRouting(3, num_iterations=2, inverse_temperatures=[1.0, 0.5])
        with self.assertRaisesRegex(ValueError, "one value per iteration"):
            EMRouting(3, inverse_temperatures=[0.5, 1.0])
        with self.assertRaisesRegex(ValueError, "capsule_dim.*16"):
            EMRouting(3, 9)
        with self.assertRaisesRegex(ValueError, "input_kind"):
            EMRouting(3, input_kind="quaternion")
        with self.assertRaisesRegex(ValueError, "output_kind"):
            EMRouting(3, output_kind="scores")
        with self.assertRaisesRegex(ValueError, "coordinate_addition"):
            EMRouting(3, 8, input_kind="vector", coordinate_addition=True)
        with self.assertRaisesRegex(ValueError, "epsilon"):
            EMRouting(3, epsilon=0.0)
        with self.assertRaisesRegex(ValueError, "data_scale"):
            EMRouting(3, data_scale=-1.0)
        with self.assertRaisesRegex(TypeError, "data_scale"):
            EMRouting(3, data_scale="half")

    def test_bad_inputs(self):
        with self.assertRaisesRegex(ValueError, "4x4 pose.*Received"):
            EMRouting(3)(np.zeros((2, 6, 16)))  # no activation / not 4x4
        with self.assertRaisesRegex(ValueError, "matrix capsules"):
            EMRouting(3)(np.zeros((2, 3, 3, 17)))
        with self.assertRaisesRegex(ValueError, "grid of matrix capsules"):
            EMRouting(3, coordinate_addition=True)(np.zeros((2, 6, 17)))
        with self.assertRaisesRegex(ValueError, "vector capsules"):
            EMRouting(3, 8, input_kind="vector")(np.zeros((2, 2, 2, 4)))
        layer = EMRouting(3)
        layer.build((None, 5, 17))
        with self.assertRaises(ValueError):
            layer(np.zeros((2, 6, 17)))

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, EMRouting, {"num_capsules": 3},
            _matrix_capsules(np.random.default_rng(5), (2, 5)),
            {"kernel": ["kernel"]})
