import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import AttentionRouting
from keras_caps.layers import Router
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import attention_routing_reference as reference


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float64")


def _hand_set_weights(layer, rng):
    """Random weights large enough for the couplings to differ clearly."""
    weights = {}
    for variable in layer.trainable_weights:
        name = variable.path.split("/")[-1]
        value = rng.normal(size=variable.shape) * (
            0.8 if name != "kernel" else 0.5)
        variable.assign(value.astype("float32"))
        weights[name] = value.astype("float32").astype("float64")
    return weights


def _reference(weights, inputs, layer, activations=None, temperature=1.0):
    return reference.attention_routing(
        inputs, weights["parent_queries"], weights["key_kernel"],
        weights["kernel"], num_iterations=layer.num_iterations,
        query_kernel=weights.get("query_kernel"), activations=activations,
        position_term=weights.get("position_term"),
        value_form=layer.value_form, normalization=layer.normalization,
        temperature=temperature, squash_variant=layer.squash)


OPTION_SETS = (
    ("defaults", {}),
    ("two_passes", {"num_iterations": 2}),
    ("two_heads", {"num_heads": 2}),
    ("two_heads_two_passes", {"num_heads": 2, "num_iterations": 2}),
    ("shared_values", {"value_form": "shared"}),
    ("over_children", {"normalization": "children"}),
    ("shared_over_children_two_heads_sabour",
     {"value_form": "shared", "normalization": "children", "num_heads": 2,
      "squash": "sabour"}),
)


class AttentionRoutingTest(TestCase):
    @parameterized.named_parameters(*OPTION_SETS)
    def test_matches_numpy_reference(self, options):
        rng = np.random.default_rng(len(str(options)))
        u = rng.normal(size=(2, 5, 3)).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, **options)
        layer.build(u.shape)
        weights = _hand_set_weights(layer, rng)
        outputs, couplings = layer(u, return_couplings=True)
        parents, expected_couplings = _reference(weights, u, layer)
        self.assertAllClose(outputs, parents[-1], atol=1e-5, rtol=1e-4)
        self.assertAllClose(couplings, expected_couplings[-1], atol=1e-5,
                            rtol=1e-4)
        # The couplings are not uniform: the test can tell passes apart.
        self.assertGreater(float(np.std(expected_couplings[-1])), 0.05)

    @parameterized.named_parameters(
        ("votes", "votes", 1), ("shared_two_passes", "shared", 2))
    def test_activations_scale_the_values(self, value_form, num_iterations):
        rng = np.random.default_rng(7)
        u = rng.normal(size=(2, 5, 3)).astype("float32")
        a = rng.uniform(size=(2, 5)).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, value_form=value_form,
                                 num_iterations=num_iterations)
        layer.build([u.shape, a.shape])
        weights = _hand_set_weights(layer, rng)
        parents, _ = _reference(weights, u, layer, activations=a)
        self.assertAllClose(layer([u, a]), parents[-1], atol=1e-5,
                            rtol=1e-4)
        self.assertGreater(
            float(np.max(np.abs(parents[-1] - _reference(
                weights, u, layer)[0][-1]))), 1e-2)

    @parameterized.named_parameters(("one_head", 1, 1), ("two_heads", 2, 2))
    def test_position_term(self, num_heads, num_iterations):
        rng = np.random.default_rng(3)
        u = rng.normal(size=(2, 2, 3, 2, 3)).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, num_heads=num_heads,
                                 num_iterations=num_iterations,
                                 use_position_term=True)
        layer.build(u.shape)
        self.assertAllClose(layer.position_term, np.zeros((2, 3, num_heads,
                                                           3)))
        weights = _hand_set_weights(layer, rng)
        outputs, couplings = layer(u, return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (2, num_heads, 12, 3))
        parents, expected = _reference(weights, u, layer)
        self.assertAllClose(outputs, parents[-1], atol=1e-5, rtol=1e-4)
        self.assertAllClose(couplings, expected[-1], atol=1e-5, rtol=1e-4)
        without = dict(weights, position_term=np.zeros_like(
            weights["position_term"]))
        self.assertGreater(float(np.max(np.abs(
            expected[-1] - _reference(without, u, layer)[1][-1]))), 1e-2)

    def test_routing_trace_has_every_pass(self):
        rng = np.random.default_rng(11)
        u = rng.normal(size=(2, 5, 3)).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, num_heads=2,
                                 num_iterations=3)
        layer.build(u.shape)
        weights = _hand_set_weights(layer, rng)
        trace = layer.routing_trace(u)
        parents, couplings = _reference(weights, u, layer)
        self.assertLen(trace["parents"], 3)
        for t in range(3):
            self.assertAllClose(trace["parents"][t], parents[t], atol=1e-5,
                                rtol=1e-4)
            self.assertAllClose(trace["couplings"][t], couplings[t],
                                atol=1e-5, rtol=1e-4)
        votes = np.einsum("bia,iajz->bijz", u.astype("float64"),
                          weights["kernel"])
        self.assertAllClose(trace["votes"], votes, atol=1e-5, rtol=1e-4)

    @parameterized.named_parameters(("parents", "parents", 3),
                                    ("children", "children", 2))
    def test_temperature(self, normalization, axis):
        rng = np.random.default_rng(5)
        u = rng.normal(size=(2, 5, 3)).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, num_heads=2,
                                 normalization=normalization)
        layer.build(u.shape)
        weights = _hand_set_weights(layer, rng)
        _, plain = layer(u, return_couplings=True)
        # (batch, heads, children, parents), summing to 1 over the
        # normalization axis.
        self.assertEqual(layer.normalization_axis, normalization)
        self.assertEqual(tuple(plain.shape), (2, 2, 5, 3))
        self.assertAllClose(np.sum(_numpy(plain), axis=axis), 1.0,
                            atol=1e-6)
        layer.temperature = 1.0
        self.assertAllClose(layer(u, return_couplings=True)[1], plain)
        layer.temperature = 1e6
        size = 3 if axis == 3 else 5
        self.assertAllClose(layer(u, return_couplings=True)[1],
                            np.full(plain.shape, 1.0 / size), atol=1e-5)
        # Below Router.MIN_TEMPERATURE the softmax divides by it: the
        # couplings are the reference's at MIN_TEMPERATURE...
        layer.temperature = 1e-6
        _, sharp = layer(u, return_couplings=True)
        expected = _reference(weights, u, layer,
                              temperature=Router.MIN_TEMPERATURE)[1][-1]
        self.assertAllClose(sharp, expected, atol=1e-5)
        # ... which are the one-hot limit wherever the best entry leads by
        # a logit gap well above MIN_TEMPERATURE: here most of them.
        plain_expected = _reference(weights, u, layer)[1][-1]
        one_hot = (plain_expected == plain_expected.max(axis=axis,
                                                         keepdims=True))
        clear = np.expand_dims(expected.max(axis=axis) > 1 - 1e-6, axis)
        self.assertGreater(float(np.mean(clear)), 0.9)
        self.assertAllClose(np.where(clear, _numpy(sharp), one_hot),
                            one_hot.astype("float64"), atol=1e-6)
        layer.temperature = 0.5
        self.assertAllClose(layer(u, return_couplings=True)[1],
                            _reference(weights, u, layer,
                                       temperature=0.5)[1][-1],
                            atol=1e-5, rtol=1e-4)

    def test_tiny_temperature_in_float16_is_finite(self):
        rng = np.random.default_rng(2)
        u = (rng.normal(size=(2, 5, 3)) * 30.0).astype("float32")
        layer = AttentionRouting(3, 4, key_dim=3, num_iterations=2,
                                 temperature=1e-30, dtype="mixed_float16")
        outputs, gradients = value_and_gradients(layer, u)
        self.assertAllFinite(outputs)
        self.assertAllFinite(gradients)
        _, couplings = layer(u, return_couplings=True)
        self.assertAllClose(np.sum(_numpy(couplings), axis=-1),
                            np.ones((2, 1, 5)), atol=1e-3)

    # Every option at least once, in few sets: the helper's checks take a
    # few seconds per set (more on JAX), and the reference tests above
    # cover each set's numbers.
    @parameterized.named_parameters(
        OPTION_SETS[0], OPTION_SETS[3], OPTION_SETS[-1])
    def test_layer(self, options):
        num_weights = 3 + (options.get("num_iterations", 1) > 1)
        self.run_layer_test(
            AttentionRouting,
            {"num_capsules": 3, "capsule_dim": 4, "key_dim": 2, **options},
            input_shape=(2, 5, 3), expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=num_weights,
            expected_num_non_trainable_weights=1)

    def test_layer_with_activations_and_position_term(self):
        self.run_layer_test(
            AttentionRouting,
            {"num_capsules": 3, "capsule_dim": 4, "key_dim": 2,
             "use_position_term": True, "num_heads": 2,
             "temperature": 0.5},
            input_shape=[(2, 2, 2, 2, 3), (2, 2, 2, 2)],
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=4,
            expected_num_parameters=3 * 2 * 2 + 3 * 2 * 2 + 8 * 3 * 3 * 4
            + 2 * 2 * 2 * 2)

    def test_temperature_is_saved_and_couplings_shape(self):
        inputs = keras.Input((5, 3))
        layer = AttentionRouting(3, 4, num_heads=2, temperature=2.5)
        outputs, couplings = layer(inputs, return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (None, 2, 5, 3))
        model = keras.Model(inputs, [outputs, couplings])
        layer.temperature = 0.25
        restored = self.run_model_saving_test(
            model, np.random.default_rng(0).normal(size=(2, 5, 3)))
        self.assertEqual(restored.layers[-1].temperature, 0.25)

    @parameterized.named_parameters(
        ("heads_not_dividing", {"num_heads": 3}, ValueError, "num_heads"),
        ("key_dim_zero", {"key_dim": 0}, ValueError, "key_dim"),
        ("key_dim_float", {"key_dim": 2.0}, TypeError, "key_dim"),
        ("temperature_zero", {"temperature": 0.0}, ValueError,
         "temperature"),
        ("temperature_inf", {"temperature": float("inf")}, ValueError,
         "temperature"),
        ("temperature_nan", {"temperature": float("nan")}, ValueError,
         "temperature"),
        ("value_form", {"value_form": "shard"}, ValueError, "value_form"),
        ("normalization", {"normalization": "heads"}, ValueError,
         "normalization"),
        ("squash", {"squash": "tanh"}, ValueError, "squash"),
        ("position_flag", {"use_position_term": 1}, TypeError,
         "use_position_term"),
    )
    def test_bad_arguments(self, options, error, name):
        with self.assertRaisesRegex(error, f"`{name}`.*Received"):
            AttentionRouting(**{"num_capsules": 3, "capsule_dim": 4,
                                **options})

    def test_bad_inputs(self):
        layer = AttentionRouting(3, 4)
        with self.assertRaisesRegex(ValueError, "activations.*Received"):
            layer([np.zeros((2, 5, 3)), np.zeros((2, 4))])
        with self.assertRaisesRegex(ValueError, "use_position_term"):
            AttentionRouting(3, 4)(np.zeros((2, 2, 2, 2, 3)))
        with self.assertRaisesRegex(ValueError, "grid children"):
            AttentionRouting(3, 4, use_position_term=True)(
                np.zeros((2, 5, 3)))
        layer = AttentionRouting(3, 4)
        layer(np.zeros((2, 5, 3)))
        with self.assertRaisesRegex(ValueError, "built for"):
            layer(np.zeros((2, 6, 3)))
        with self.assertRaisesRegex(ValueError, "list of 3"):
            AttentionRouting(3, 4)([np.zeros((2, 5, 3))] * 3)
