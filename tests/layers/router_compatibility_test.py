"""Code and files written for the routers before their contract still work."""

import os
import warnings

import keras
import numpy as np

from keras_caps import diagnostics
from keras_caps import layers
from keras_caps import visualization
from keras_caps.testing import TestCase

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir,
                        "legacy_models")


class _OwnRouting(layers.DynamicRouting):
    """A user's subclass, as written for the code before `Router`."""

    def build(self, input_shape):
        super().build(input_shape)
        self.extra = self.add_weight(name="extra", shape=(),
                                     initializer="ones")


class _HoldsARouter(keras.layers.Layer):
    """A user's layer holding a router as an attribute."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.router = layers.FCCaps(3, 4, name="held")

    def call(self, inputs):
        return self.router(inputs)


class RouterCompatibilityTest(TestCase):
    def test_routing_maps_of_a_file_saved_before_the_contract(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            model = keras.saving.load_model(
                os.path.join(FIXTURES, "routers_before_contract.keras"))
        inputs = np.load(os.path.join(
            FIXTURES, "routers_before_contract.npz"))["inputs"][:1]
        for name, parents in (("fc_caps", 3), ("dynamic", 3),
                              ("inverted", 3), ("vector", 3)):
            layer = model.get_layer(name)
            self.assertEqual(layer.couplings_layout, "legacy")
            shown = visualization.routing_couplings(model, inputs, name)
            self.assertEqual(shown.shape, (parents, 6), name)
            self.assertAllClose(shown.sum(axis=0), np.ones(6), atol=1e-5)
            # The same couplings the old layout returns, transposed.
            if name in ("fc_caps", "dynamic", "inverted"):
                with self.assertWarns(DeprecationWarning):
                    _, old = layer(inputs, return_couplings=True)
                self.assertAllClose(
                    shown, keras.ops.convert_to_numpy(old)[0], atol=1e-6)

    def test_subclass_overriding_build_and_old_config(self):
        layer = _OwnRouting(3, 4, attention=None, attention_weight=0.0,
                            attention_initializer="glorot_uniform")
        outputs, couplings = layer(np.ones((2, 5, 4), "float32"),
                                   return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (2, 1, 5, 3))
        self.assertEqual(layer.temperature_variable.dtype, "float32")
        self.assertEqual(float(layer.extra.numpy()), 1.0)

    def test_routers_held_by_other_layers_are_found(self):
        inputs = keras.Input((6, 4))
        holder = _HoldsARouter()
        model = keras.Model(inputs, holder(inputs))
        self.assertEqual([r.name for r in diagnostics.find_routers(model)],
                         ["held"])

    def test_config_keeps_a_mixed_precision_policy(self):
        for cls in (layers.FCCaps, layers.HybridRouting,
                    layers.VectorRouting):
            layer = cls(3, 4, dtype="mixed_bfloat16")
            restored = cls.from_config(layer.get_config())
            self.assertEqual(restored.dtype_policy.name, "mixed_bfloat16")
            self.assertEqual(restored.compute_dtype, "bfloat16")
