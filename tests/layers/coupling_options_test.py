"""The `coupling` option of the routers that normalise with a softmax.

`DynamicRouting`, `HybridRouting` and `AttentionRouting` replace the
tempered softmax with sparsemax, entmax-1.5, sigmoid gates or a
straight-through Gumbel-softmax sample. Each router's couplings are
checked against the NumPy coupling (`tests/ops/sparse_couplings_reference`,
written from the papers) of the agreement its trace reports, divided by
the temperature.
"""

import os

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import layers
from keras_caps.layers.router import COUPLINGS
from keras_caps.ops import gumbel_noise
from keras_caps.testing import TestCase
from tests.ops import sparse_couplings_reference as reference

ROUTERS = {
    "dynamic": lambda **kw: layers.DynamicRouting(3, 4, num_iterations=2,
                                                  **kw),
    "hybrid": lambda **kw: layers.HybridRouting(
        3, 4, attention="bilinear", attention_weight=0.8, **kw),
    "attention": lambda **kw: layers.AttentionRouting(3, 4, key_dim=2,
                                                      **kw),
}
TEMPERATURE = 0.7


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype="float64")


def _children(batch=2, seed=0):
    return np.random.default_rng(seed).normal(
        size=(batch, 5, 3)).astype("float32")


def _router(name, **kwargs):
    keras.utils.set_random_seed(1)
    layer = ROUTERS[name](**kwargs)
    layer(_children())
    return layer


def _axis(layer):
    return {"parents": 3, "children": 2}[layer.normalization_axis]


class CouplingOptionsTest(TestCase):
    @parameterized.named_parameters(
        [(f"{router}_{coupling}", router, coupling, "argmax")
         for router in sorted(ROUTERS) for coupling in COUPLINGS]
        + [("attention_gumbel_softmax_inference", "attention",
            "gumbel_softmax", "softmax")])
    def test_couplings_are_the_coupling_of_the_agreement(
            self, router, coupling, gumbel_inference):
        layer = _router(router, coupling=coupling,
                        gumbel_inference=gumbel_inference)
        layer.temperature = TEMPERATURE
        trace = layer.routing_trace(_children())
        for couplings, agreement in zip(trace["couplings"],
                                        trace["agreement"]):
            expected = reference.coupling(
                coupling, _numpy(agreement) / TEMPERATURE, _axis(layer),
                gumbel_inference)
            self.assertAllClose(_numpy(couplings), expected, atol=2e-6)
        _, called = layer(_children(), return_couplings=True)
        self.assertAllClose(_numpy(called), _numpy(trace["couplings"][-1]),
                            atol=1e-6)
        self.assertEqual(layer.couplings_normalized, coupling != "sigmoid")

    @parameterized.named_parameters(
        ("sparsemax", "sparsemax"), ("entmax15", "entmax15"))
    def test_sparse_couplings_have_exact_zeros(self, coupling):
        layer = _router("attention", coupling=coupling)
        layer.temperature = 0.05
        _, couplings = layer(_children(), return_couplings=True)
        couplings = _numpy(couplings)
        self.assertGreater(np.mean(couplings == 0.0), 0.1)
        self.assertAllClose(couplings.sum(axis=3), 1.0, atol=2e-6)

    def test_sigmoid_gates_are_not_normalised(self):
        layer = _router("attention", coupling="sigmoid")
        _, couplings = layer(_children(), return_couplings=True)
        couplings = _numpy(couplings)
        self.assertFalse(layer.couplings_normalized)
        self.assertTrue(np.all((couplings > 0.0) & (couplings < 1.0)))
        self.assertGreater(np.abs(couplings.sum(axis=3) - 1.0).max(), 0.05)

    def test_leaky_sparsemax_drops_the_leak(self):
        layer = _router("dynamic", coupling="sparsemax", leaky=True)
        trace = layer.routing_trace(_children())
        agreement = _numpy(trace["agreement"][-1])  # (b, 1, i, j)
        leak = np.zeros(agreement.shape[:3] + (1,))
        expected = reference.coupling(
            "sparsemax", np.concatenate([leak, agreement], axis=3), 3)
        self.assertAllClose(_numpy(trace["couplings"][-1]),
                            expected[..., 1:], atol=2e-6)

    @parameterized.named_parameters((name, name) for name in sorted(ROUTERS))
    def test_gumbel_is_one_hot_in_training(self, router):
        layer = _router(router, coupling="gumbel_softmax", seed=4)
        _, couplings = layer(_children(), return_couplings=True,
                             training=True)
        couplings = _numpy(couplings)
        np.testing.assert_array_equal(np.unique(couplings), [0.0, 1.0])
        self.assertAllClose(couplings.sum(axis=3), 1.0, atol=0.0)
        # The same seed draws the same samples; the next draw differs.
        again = _router(router, coupling="gumbel_softmax", seed=4)
        _, same = again(_children(), return_couplings=True, training=True)
        np.testing.assert_array_equal(_numpy(same), couplings)
        _, draw = layer(_children(), return_couplings=True, training=True)
        self.assertFalse(np.array_equal(_numpy(draw), couplings))

    def test_gumbel_samples_are_the_perturbed_argmax(self):
        layer = _router("attention", coupling="gumbel_softmax", seed=2)
        layer.temperature = TEMPERATURE
        _, samples = layer(_children(), return_couplings=True, training=True)
        agreement = _numpy(layer.routing_trace(_children())["agreement"][0])
        # The layer's first draw: a fresh generator with the same seed.
        noise = _numpy(gumbel_noise(agreement.shape,
                                    seed=keras.random.SeedGenerator(2)))
        np.testing.assert_array_equal(
            _numpy(samples),
            reference.one_hot_argmax(agreement / TEMPERATURE + noise, 3))

    def test_keras_round_trip_keeps_the_option(self):
        layer = _router("hybrid", coupling="gumbel_softmax",
                        gumbel_inference="softmax", seed=7)
        inputs = keras.Input((5, 3))
        model = keras.Model(inputs, layer(inputs))
        path = os.path.join(self.get_temp_dir(), "hybrid.keras")
        model.save(path)
        loaded = keras.saving.load_model(path).layers[-1]
        self.assertEqual(
            (loaded.coupling, loaded.gumbel_inference, loaded.seed),
            ("gumbel_softmax", "softmax", 7))
        self.assertAllClose(_numpy(loaded(_children())),
                            _numpy(layer(_children())), atol=1e-6)
        for router in sorted(ROUTERS):
            config = ROUTERS[router](coupling="entmax15").get_config()
            self.assertEqual(config["coupling"], "entmax15")
            self.assertEqual(type(ROUTERS[router]()).from_config(
                config).coupling, "entmax15")

    def test_softmax_is_the_unchanged_default(self):
        for router in sorted(ROUTERS):
            layer = _router(router)
            self.assertEqual(layer.coupling, "softmax")
            self.assertEqual(layer.get_config()["coupling"], "softmax")
            self.assertTrue(layer.couplings_normalized)
            logits = keras.ops.convert_to_tensor(
                _children().reshape(2, 1, 5, 3) * 3.0)
            # The very same tensor as the tempered softmax, bit for bit.
            np.testing.assert_array_equal(
                _numpy(layer.normalize_couplings(logits, 3)),
                _numpy(layer.tempered_softmax(logits, 3)))
        # Routers without the option keep their config and refuse others.
        self.assertNotIn("coupling", layers.FCCaps(3, 4).get_config())
        with self.assertRaisesRegex(ValueError, "`coupling`"):
            layers.FCCaps(3, 4, coupling="sparsemax")

    def test_bad_arguments(self):
        with self.assertRaisesRegex(
                ValueError, r"`coupling`.*Received: coupling='sparse'"):
            layers.DynamicRouting(3, 4, coupling="sparse")
        with self.assertRaisesRegex(ValueError, "`coupling`"):
            layers.AttentionRouting(3, 4, coupling="hardmax")
        with self.assertRaisesRegex(ValueError, "`gumbel_inference`"):
            layers.HybridRouting(3, 4, coupling="gumbel_softmax",
                                 gumbel_inference="sample")
        with self.assertRaisesRegex(ValueError, "`seed`"):
            layers.DynamicRouting(3, 4, coupling="gumbel_softmax", seed=-1)
        with self.assertRaisesRegex(ValueError, "`seed`"):
            layers.DynamicRouting(3, 4, coupling="gumbel_softmax",
                                  seed=1.5)
