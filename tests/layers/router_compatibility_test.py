"""Routers in user code, and router files of keras_caps 0.1.0 refused.

User code: a subclass overriding `build`, a router held by another layer, a
config with a mixed-precision policy. Files: a router config or weights
saved before the router contract is refused with one line naming what
wrote it (`tests/legacy_models_test.py` does the same with real files).
"""

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import diagnostics
from keras_caps import layers
from keras_caps.testing import TestCase
from tests.layers.router_contract_test import concrete_routers
from tests.layers.router_contract_test import router_cases

# The routers that existed before the contract, and the config entries
# every config of theirs holds since (`Router.keys_since_contract`).
BEFORE_CONTRACT = {
    "AttentionRouting": ("temperature",),
    "DynamicRouting": ("temperature", "couplings_layout"),
    "FCCaps": ("temperature", "couplings_layout"),
    "InvertedAttentionRouting": ("temperature", "couplings_layout"),
    "VectorRouting": ("temperature", "couplings_layout"),
}
REFUSAL = (r"^The `{cls}` layer 'old' was saved by keras_caps 0.1.0 before "
           r"the router contract \(its config has {evidence}\); keras_caps "
           "0.2.0 does not load such files: build the model with "
           "keras_caps 0.2.0 and train it again.$")


class _OwnRouting(layers.DynamicRouting):
    """A user's subclass overriding `build`."""

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
    def test_subclass_overriding_build(self):
        layer = _OwnRouting(3, 4)
        outputs, couplings = layer(np.ones((2, 5, 4), "float32"),
                                   return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (2, 1, 5, 3))
        self.assertEqual(layer.temperature_variable.dtype, "float32")
        self.assertEqual(float(layer.extra.numpy()), 1.0)
        restored = _OwnRouting.from_config(layer.get_config())
        self.assertEqual(restored.get_config(), layer.get_config())

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

    def test_routers_of_before_the_contract(self):
        found = {name: cls.keys_since_contract
                 for name, cls in concrete_routers().items()
                 if cls.keys_since_contract}
        self.assertEqual(found, BEFORE_CONTRACT)
        for name, cls in concrete_routers().items():
            config = router_cases()[name][0]().get_config()
            self.assertEqual(
                "couplings_layout" in config,
                "couplings_layout" in cls.keys_since_contract, name)
            if "couplings_layout" in config:
                self.assertEqual(config["couplings_layout"], "unified")

    @parameterized.named_parameters((name, name) for name in BEFORE_CONTRACT)
    def test_config_of_before_the_contract_is_refused(self, name):
        cls = concrete_routers()[name]
        config = cls(3, 4, name="old").get_config()
        keys = cls.keys_since_contract
        for missing, evidence in (
                (keys, "neither `temperature` nor `couplings_layout`"
                 if len(keys) == 2 else "no `temperature`"),
                (keys[-1:], f"no `{keys[-1]}`")):
            old = {key: value for key, value in config.items()
                   if key not in missing}
            with self.assertRaisesRegex(ValueError, REFUSAL.format(
                    cls=name, evidence=evidence)):
                cls.from_config(old)
        self.assertEqual(cls.from_config(config).get_config(), config)

    @parameterized.named_parameters(
        (name, name) for name, keys in BEFORE_CONTRACT.items()
        if "couplings_layout" in keys)
    def test_config_with_the_old_couplings_layout_is_refused(self, name):
        # What keras_caps 0.1.0 wrote when it saved again a file of before
        # the contract: the old layout, kept.
        cls = concrete_routers()[name]
        config = {**cls(3, 4, name="old").get_config(),
                  "couplings_layout": "legacy"}
        with self.assertRaisesRegex(ValueError, REFUSAL.format(
                cls=name, evidence="`couplings_layout='legacy'`, the layout "
                "of such a file")):
            cls.from_config(config)
