import os

import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import ConvPrimaryCaps
from keras_caps.layers import DynamicRouting
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import routing_reference
from tests.layers.weight_options import check_regularizers_and_constraints

# The DigitCaps of Sabour et al.'s MNIST CapsNet: 1152 x 8 -> 10 x 16,
# without and with the official code's bias.
DIGIT_CAPS_PARAMS = 1152 * 8 * 10 * 16
DIGIT_CAPS_PARAMS_WITH_BIAS = 1_474_720


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _set_weights(layer, rng, input_shape, use_bias):
    """Hand-set weights large enough for routing to change the couplings."""
    num_inputs, input_dim = input_shape[1:]
    kernel = rng.normal(size=(num_inputs, input_dim, layer.num_capsules,
                              layer.capsule_dim)) * 0.8
    weights = [kernel.astype("float32")]
    bias = None
    if use_bias:
        bias = rng.normal(size=(layer.num_capsules, layer.capsule_dim)) * 0.3
        weights.append(bias.astype("float32"))
    layer.kernel.assign(weights[0])
    if use_bias:
        layer.bias.assign(weights[1])
    return weights[0].astype("float64"), (
        None if bias is None else weights[1].astype("float64"))


class DynamicRoutingTest(TestCase):
    @parameterized.named_parameters(
        ("defaults", {}, 1, 3 * 5 * 3 * 4),
        ("all_options", {"num_iterations": 2, "stop_inner_gradients": True,
                         "leaky": True, "use_bias": True}, 2,
         3 * 5 * 3 * 4 + 3 * 4),
    )
    def test_layer(self, options, num_weights, num_parameters):
        self.run_layer_test(
            DynamicRouting,
            {"num_capsules": 3, "capsule_dim": 4, **options},
            input_shape=(2, 5, 3),
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=num_weights,
            expected_num_non_trainable_weights=1,
            expected_num_parameters=num_parameters,
        )

    def test_official_parameter_counts(self):
        layer = DynamicRouting(10, 16)
        layer.build((None, 1152, 8))
        self.assertEqual(tuple(layer.kernel.shape), (1152, 8, 10, 16))
        # One more for the routing temperature.
        self.assertEqual(layer.count_params(), DIGIT_CAPS_PARAMS + 1)
        layer = DynamicRouting(10, 16, use_bias=True)
        layer.build((None, 1152, 8))
        self.assertEqual(layer.count_params(),
                         DIGIT_CAPS_PARAMS_WITH_BIAS + 1)
        self.assertAllClose(_numpy(layer.bias), np.full((10, 16), 0.1))

    @parameterized.named_parameters(
        ("one_iteration", 1, False, False),
        ("two_iterations", 2, False, False),
        ("three_iterations", 3, False, False),
        ("three_iterations_leaky", 3, True, False),
        ("three_iterations_bias", 3, False, True),
        ("two_iterations_leaky_bias", 2, True, True),
    )
    def test_matches_numpy_reference(self, num_iterations, leaky, use_bias):
        rng = np.random.default_rng(num_iterations)
        u = rng.normal(size=(3, 5, 4)).astype("float32")
        layer = DynamicRouting(3, 2, num_iterations=num_iterations,
                               leaky=leaky, use_bias=use_bias)
        layer.build(u.shape)
        kernel, bias = _set_weights(layer, rng, u.shape, use_bias)
        expected, expected_couplings = routing_reference.dynamic_routing(
            u.astype("float64"), kernel, num_iterations, bias=bias,
            leaky=leaky)
        outputs, couplings = layer(u, return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-5, rtol=1e-4)
        # Reference (batch, children, parents) -> the Router layout
        # (batch, 1, children, parents).
        self.assertAllClose(couplings, expected_couplings[:, None],
                            atol=1e-5, rtol=1e-4)

    def test_routing_changes_outputs(self):
        # Guards the reference test: with these weights each iteration
        # moves the outputs, so a missing update would be caught.
        rng = np.random.default_rng(3)
        u = rng.normal(size=(3, 5, 4))
        kernel = rng.normal(size=(5, 4, 3, 2)) * 0.8
        one, _ = routing_reference.dynamic_routing(u, kernel, 1)
        two, _ = routing_reference.dynamic_routing(u, kernel, 2)
        three, _ = routing_reference.dynamic_routing(u, kernel, 3)
        self.assertGreater(np.max(np.abs(two - one)), 1e-2)
        self.assertGreater(np.max(np.abs(three - two)), 1e-3)

    @parameterized.named_parameters(("plain", False), ("leaky", True))
    def test_couplings_sum_over_parents(self, leaky):
        u = np.random.default_rng(1).normal(size=(4, 7, 3)).astype("float32")
        layer = DynamicRouting(5, 2, leaky=leaky,
                               kernel_initializer="random_normal")
        _, couplings = layer(u, return_couplings=True)
        # (batch, heads, children, parents), normalised over the parents.
        self.assertEqual(layer.normalization_axis, "parents")
        self.assertEqual(tuple(couplings.shape), (4, 1, 7, 5))
        totals = _numpy(keras.ops.sum(couplings, axis=3))[:, 0]
        if leaky:
            self.assertTrue(np.all(totals < 1.0))
            self.assertTrue(np.all(totals > 0.0))
        else:
            self.assertAllClose(totals, np.ones((4, 7)), atol=1e-6)

    @parameterized.named_parameters(("plain", False, 4), ("leaky", True, 5))
    def test_one_iteration_gives_uniform_couplings(self, leaky, denominator):
        u = np.random.default_rng(2).normal(size=(3, 6, 2)).astype("float32")
        layer = DynamicRouting(4, 3, num_iterations=1, leaky=leaky)
        _, couplings = layer(u, return_couplings=True)
        self.assertAllClose(couplings,
                            np.full((3, 1, 6, 4), 1 / denominator),
                            atol=1e-7)

    def test_stop_inner_gradients(self):
        # With stopped inner gradients (as the official code's inner
        # iterations do) the kernel's gradient is
        # the one obtained with the final couplings held constant; with
        # full backprop it is the gradient through every iteration. The
        # reference predicts both, and that they differ.
        rng = np.random.default_rng(4)
        u = rng.normal(size=(2, 3, 2)).astype("float32")
        kernel = (rng.normal(size=(3, 2, 2, 3)) * 0.8).astype("float32")
        u64, kernel64 = u.astype("float64"), kernel.astype("float64")
        _, final_couplings = routing_reference.dynamic_routing(
            u64, kernel64, 3)

        def full(w):
            return routing_reference.dynamic_routing(u64, w, 3)[0].sum()

        def frozen(w):
            return routing_reference.dynamic_routing(
                u64, w, 3, couplings=final_couplings)[0].sum()

        expected_full = routing_reference.numerical_gradient(full, kernel64)
        expected_frozen = routing_reference.numerical_gradient(frozen,
                                                               kernel64)
        self.assertGreater(np.max(np.abs(expected_full - expected_frozen)),
                           1e-2)
        for stop, expected in ((False, expected_full),
                               (True, expected_frozen)):
            layer = DynamicRouting(2, 3, stop_inner_gradients=stop)
            layer.build(u.shape)
            layer.kernel.assign(kernel)
            outputs, (_, kernel_gradient) = value_and_gradients(layer, u)
            # Same forward values either way.
            self.assertAllClose(
                outputs, routing_reference.dynamic_routing(u64, kernel64,
                                                           3)[0],
                atol=1e-5, rtol=1e-4)
            self.assertAllClose(kernel_gradient, expected, atol=1e-4,
                                rtol=1e-3, msg=f"stop={stop}")

    @parameterized.named_parameters(
        ("float32", "float32"),
        ("mixed_float16", "mixed_float16"),
        ("mixed_bfloat16", "mixed_bfloat16"),
    )
    def test_zero_inputs_and_votes_are_finite(self, policy):
        for options in ({}, {"leaky": True, "use_bias": True,
                             "stop_inner_gradients": True}):
            layer = DynamicRouting(3, 4, dtype=policy, **options)
            zeros = np.zeros((2, 5, 3), dtype="float32")
            outputs, gradients = value_and_gradients(layer, zeros)
            self.assertAllFinite(outputs, f"outputs under {policy}")
            self.assertAllFinite(gradients, f"gradients under {policy}")
            # All-zero votes from a zero kernel and non-zero inputs.
            layer.set_weights([np.zeros_like(w) for w in
                               layer.get_weights()])
            ones = np.ones((2, 5, 3), dtype="float32")
            outputs, gradients = value_and_gradients(layer, ones)
            self.assertAllFinite(outputs, f"outputs under {policy}")
            self.assertAllFinite(gradients, f"gradients under {policy}")

    def test_unknown_batch_size(self):
        inputs = keras.Input((6, 3))
        outputs, couplings = DynamicRouting(4, 2)(inputs,
                                                  return_couplings=True)
        self.assertEqual(tuple(outputs.shape), (None, 4, 2))
        self.assertEqual(tuple(couplings.shape), (None, 1, 6, 4))
        model = keras.Model(inputs, outputs)
        data = np.random.default_rng(5).normal(size=(5, 6, 3))
        full = model.predict(data.astype("float32"), batch_size=5, verbose=0)
        single = model.predict(data[:1].astype("float32"), verbose=0)
        self.assertAllClose(single, full[:1], atol=1e-5, rtol=1e-5)

    @parameterized.named_parameters(
        ("zero_capsules", {"num_capsules": 0}, ValueError, "num_capsules"),
        ("negative_dim", {"capsule_dim": -2}, ValueError, "capsule_dim"),
        ("string_dim", {"capsule_dim": "16"}, TypeError, "capsule_dim"),
        ("zero_iterations", {"num_iterations": 0}, ValueError,
         "num_iterations"),
        ("float_iterations", {"num_iterations": 2.5}, TypeError,
         "num_iterations"),
        ("leaky_string", {"leaky": "yes"}, TypeError, "leaky"),
        ("stop_int", {"stop_inner_gradients": 1}, TypeError,
         "stop_inner_gradients"),
        ("temperature_zero", {"temperature": 0.0}, ValueError,
         "temperature"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            DynamicRouting(**kwargs)

    @parameterized.named_parameters(("bilinear", "bilinear"),
                                    ("concat", "concat"))
    def test_attention_is_not_an_argument(self, attention):
        # The hybrid is `HybridRouting(attention=...)`.
        with self.assertRaisesRegex(
                ValueError, "Unrecognized keyword arguments.*attention"):
            DynamicRouting(4, 4, attention=attention)

    def test_bad_input_shapes(self):
        layer = DynamicRouting(3, 4)
        with self.assertRaisesRegex(ValueError, "ndim=3"):
            layer(keras.KerasTensor((None, 16)))
        with self.assertRaisesRegex(ValueError, "3-D input.*Received: "
                                    "input_shape=\\(None, 16\\)"):
            layer.compute_output_shape((None, 16))
        layer(keras.KerasTensor((None, 16, 8)))
        message = ("built for inputs of 16 capsules of dimension 8.*"
                   "Received: input_shape=\\({}\\)")
        with self.assertRaisesRegex(ValueError, message.format("2, 16, 6")):
            layer(np.zeros((2, 16, 6), dtype="float32"))
        with self.assertRaisesRegex(ValueError,
                                    message.format("None, 12, 8")):
            layer(keras.KerasTensor((None, 12, 8)))
        with self.assertRaisesRegex(ValueError, "known number"):
            DynamicRouting(3, 4).build((None, None, 8))

    @pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                        reason="SavedModel export needs TensorFlow")
    def test_saved_model_export(self):
        import tensorflow as tf

        inputs = keras.Input((9, 9, 2))
        capsules = ConvPrimaryCaps(2, 4, kernel_size=3, strides=2)(inputs)
        outputs = DynamicRouting(3, 4, leaky=True, use_bias=True)(capsules)
        model = keras.Model(inputs, outputs)
        path = os.path.join(self.get_temp_dir(), "exported")
        model.export(path, format="tf_saved_model", verbose=False)
        loaded = tf.saved_model.load(path)
        rng = np.random.default_rng(6)
        for batch in (1, 3):
            x = rng.normal(size=(batch, 9, 9, 2)).astype("float32")
            self.assertAllClose(loaded.serve(x), model(x), atol=1e-5,
                                rtol=1e-5)

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, DynamicRouting,
            {"num_capsules": 3, "capsule_dim": 4, "use_bias": True},
            np.random.default_rng(2).normal(size=(2, 5, 3)),
            {"kernel": ["kernel"], "bias": ["bias"]})

