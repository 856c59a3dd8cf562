import warnings

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import DynamicRouting
from keras_caps.layers import HybridRouting
from keras_caps.layers import Router
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import routing_reference
from tests.layers.dynamic_routing_test import _set_weights


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


class HybridRoutingTest(TestCase):
    @parameterized.named_parameters(
        ("bilinear", {"attention": "bilinear"}, 3, 3 * 5 * 3 * 4 + 3 * 4 + 1),
        ("concat", {"attention": "concat", "attention_weight": 0.5,
                    "leaky": True, "use_bias": True}, 5,
         3 * 5 * 3 * 4 + 3 * 4 + 2 * 4 + 1 + 1),
    )
    def test_layer(self, options, num_weights, num_parameters):
        self.run_layer_test(
            HybridRouting,
            {"num_capsules": 3, "capsule_dim": 4, **options},
            input_shape=(2, 5, 3),
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=num_weights,
            expected_num_non_trainable_weights=1,
            expected_num_parameters=num_parameters,
        )

    def test_is_a_router_and_a_dynamic_routing(self):
        layer = HybridRouting(3, 2)
        self.assertIsInstance(layer, Router)
        self.assertIsInstance(layer, DynamicRouting)
        self.assertEqual(layer.attention, "bilinear")
        # Before build the weight reads its initial value; after, the
        # variable.
        self.assertIsNone(layer.attention_weight_variable)
        self.assertEqual(layer.attention_weight, 0.0)
        layer = HybridRouting(3, 2, attention="concat", attention_weight=0.25)
        self.assertEqual(layer.attention_weight, 0.25)
        layer.build((None, 5, 4))
        self.assertEqual(layer.initial_attention_weight, 0.25)
        layer.attention_weight_variable.assign(0.75)
        self.assertEqual(layer.attention_weight, 0.75)
        self.assertEqual(layer.initial_attention_weight, 0.25)
        self.assertEqual(layer.get_config()["attention_weight"], 0.25)

    @parameterized.product(
        attention=("bilinear", "concat"), num_iterations=(1, 2, 3),
        options=({}, {"leaky": True}, {"use_bias": True}),
    )
    def test_matches_numpy_reference(self, attention, num_iterations,
                                     options):
        rng = np.random.default_rng(num_iterations)
        u = rng.normal(size=(3, 5, 4)).astype("float32")
        temperature = 0.5 if options else 1.0
        layer = HybridRouting(3, 2, num_iterations=num_iterations,
                              attention=attention, temperature=temperature,
                              **options)
        layer.build(u.shape)
        kernel, bias = _set_weights(layer, rng, u.shape,
                                    options.get("use_bias", False))
        if attention == "bilinear":
            attention_kernel = rng.normal(size=(4, 2)).astype("float32")
        else:
            attention_kernel = rng.normal(size=(4,)).astype("float32")
            attention_bias = np.float32(-0.3)
            layer.attention_bias.assign(attention_bias)
        layer.attention_kernel.assign(attention_kernel)
        layer.attention_weight_variable.assign(1.5)
        self.assertEqual(layer.attention_weight, 1.5)
        reference_options = {
            "bias": bias, "leaky": options.get("leaky", False),
            "temperature": temperature, "attention": attention,
            "attention_kernel": attention_kernel.astype("float64")}
        if attention == "concat":
            reference_options["attention_bias"] = float(attention_bias)
        expected, expected_couplings = routing_reference.dynamic_routing(
            u.astype("float64"), kernel, num_iterations,
            attention_weight=1.5, **reference_options)
        outputs, couplings = layer(u, return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-5, rtol=1e-4)
        # Reference (batch, children, parents) -> the Router layout
        # (batch, 1, children, parents).
        self.assertAllClose(couplings, expected_couplings[:, None],
                            atol=1e-5, rtol=1e-4)
        # Guards the test: the attention term moves the couplings.
        _, plain_couplings = routing_reference.dynamic_routing(
            u.astype("float64"), kernel, num_iterations,
            **{**reference_options, "attention": None})
        self.assertGreater(
            np.max(np.abs(plain_couplings - expected_couplings)), 1e-2)

    @parameterized.named_parameters(("bilinear", "bilinear"),
                                    ("concat", "concat"))
    def test_attention_term_does_not_overflow_float16(self, attention):
        # Large unsquashed children: the bilinear term, quadratic in them,
        # would overflow float16 (and 0 * inf poison the couplings at
        # lambda = 0); it is computed in float32.
        u = np.random.default_rng(4).normal(
            0.0, 300.0, (2, 32, 8)).astype("float32")
        plain = DynamicRouting(10, 16, dtype="mixed_float16")
        hybrid = HybridRouting(10, 16, attention=attention,
                               dtype="mixed_float16")
        plain.build(u.shape)
        hybrid.build(u.shape)
        hybrid.kernel.assign(plain.kernel)
        expected, expected_couplings = plain(u, return_couplings=True)
        outputs, couplings = hybrid(u, return_couplings=True)
        self.assertAllFinite(outputs, "outputs")
        self.assertAllFinite(couplings, "couplings")
        np.testing.assert_array_equal(_numpy(couplings),
                                      _numpy(expected_couplings))
        np.testing.assert_array_equal(_numpy(outputs), _numpy(expected))

    @parameterized.named_parameters(("bilinear", "bilinear"),
                                    ("concat", "concat"))
    def test_zero_weight_is_plain_routing(self, attention):
        rng = np.random.default_rng(8)
        u = rng.normal(size=(3, 5, 4)).astype("float32")
        plain = DynamicRouting(3, 2, use_bias=True, leaky=True)
        plain.build(u.shape)
        kernel, bias = _set_weights(plain, rng, u.shape, use_bias=True)
        hybrid = HybridRouting(3, 2, use_bias=True, leaky=True,
                               attention=attention,
                               attention_initializer="random_normal")
        hybrid.build(u.shape)
        hybrid.kernel.assign(kernel.astype("float32"))
        hybrid.bias.assign(bias.astype("float32"))
        self.assertEqual(hybrid.attention_weight, 0.0)
        expected, expected_couplings = plain(u, return_couplings=True)
        outputs, couplings = hybrid(u, return_couplings=True)
        # Bit-identical to plain routing-by-agreement at lambda = 0.
        np.testing.assert_array_equal(_numpy(outputs), _numpy(expected))
        np.testing.assert_array_equal(_numpy(couplings),
                                      _numpy(expected_couplings))
        # lambda is learned: at 0 its gradient equals the NumPy one.
        self.assertTrue(hybrid.attention_weight_variable.trainable)
        reference_options = {
            "bias": bias, "leaky": True, "attention": attention,
            "attention_kernel":
                _numpy(hybrid.attention_kernel).astype("float64")}
        if attention == "concat":
            reference_options["attention_bias"] = float(
                _numpy(hybrid.attention_bias))
        u64 = u.astype("float64")

        def total(weight):
            return routing_reference.dynamic_routing(
                u64, kernel, 3, attention_weight=float(weight[0]),
                **reference_options)[0].sum()

        expected_gradient = routing_reference.numerical_gradient(
            total, np.zeros(1))
        _, gradients = value_and_gradients(hybrid, u)
        index = 1 + [id(w) for w in hybrid.trainable_weights].index(
            id(hybrid.attention_weight_variable))
        self.assertGreater(abs(expected_gradient[0]), 1e-3)
        self.assertAllClose(gradients[index], expected_gradient[0],
                            atol=1e-4, rtol=1e-3)

    @parameterized.named_parameters(("bilinear", "bilinear"),
                                    ("concat", "concat"))
    def test_config_saved_as_dynamic_routing_is_refused(self, attention):
        # Before `HybridRouting` (keras_caps 0.1.0, before the router
        # contract) the hybrid was saved as a `DynamicRouting` with the
        # attention arguments and no `couplings_layout`.
        config = DynamicRouting(3, 2, name="old").get_config()
        del config["couplings_layout"]
        config.update({"attention": attention, "attention_weight": 0.3,
                       "attention_initializer": "glorot_uniform"})
        with self.assertRaisesRegex(
                ValueError, "^The `DynamicRouting` layer 'old' was saved by "
                "keras_caps 0.1.0 before the router contract "
                r"\(its config has no `couplings_layout`\); keras_caps "
                "0.2.0 does not load such files"):
            DynamicRouting.from_config(config)

    def test_config_round_trip_keeps_the_hybrid(self):
        layer = HybridRouting(3, 2, attention="concat", attention_weight=0.4,
                              temperature=0.5)
        config = layer.get_config()
        # It never had another couplings layout: no layout to record.
        self.assertNotIn("couplings_layout", config)
        self.assertEqual(config["attention"], "concat")
        self.assertEqual(config["attention_weight"], 0.4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            revived = HybridRouting.from_config(config)
        self.assertIs(type(revived), HybridRouting)
        self.assertEqual(revived.get_config(), config)

    @parameterized.named_parameters(
        ("unknown_attention", {"attention": "additive"}, ValueError,
         "attention"),
        ("attention_bool", {"attention": True}, ValueError, "attention"),
        ("attention_none", {"attention": None}, ValueError, "attention"),
        ("attention_weight_string", {"attention_weight": "1"}, TypeError,
         "attention_weight"),
        ("attention_weight_nan", {"attention_weight": float("nan")},
         ValueError, "attention_weight"),
        ("attention_weight_inf", {"attention_weight": float("inf")},
         ValueError, "attention_weight"),
        ("zero_iterations", {"num_iterations": 0}, ValueError,
         "num_iterations"),
        ("temperature_zero", {"temperature": 0.0}, ValueError,
         "temperature"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            HybridRouting(**kwargs)
