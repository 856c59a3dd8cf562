"""Models saved by keras_caps 0.1.0 load and predict the same today.

The fixtures in `tests/legacy_models/` were written by
`tests/legacy_models/make_fixtures.py` with the code of commit 7b85966
(before the applications were reorganised): a compiled EfficientCapsNet and a
tiny graph with every capsule layer and router of the package. They load
with `keras.saving.load_model` and no `custom_objects`, and reproduce the
outputs recorded when they were saved.
"""

import os

import keras
import numpy as np

import keras_caps
from keras_caps.testing import TestCase

FIXTURES = os.path.join(os.path.dirname(__file__), "legacy_models")


class LegacyModelsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.outputs = np.load(os.path.join(FIXTURES, "outputs.npz"))

    def test_compiled_efficient_capsnet(self):
        model = keras.saving.load_model(
            os.path.join(FIXTURES, "efficient_capsnet_16x16.keras"))
        self.assertIsInstance(model.loss, keras_caps.losses.MarginLoss)
        self.assertIsInstance(model.get_layer("digit_caps"),
                              keras_caps.layers.FCCaps)
        scores = model.predict(self.outputs["efficient_capsnet_images"],
                               verbose=0)
        self.assertAllClose(scores, self.outputs["efficient_capsnet_scores"],
                            atol=1e-6)

    def test_every_layer(self):
        model = keras.saving.load_model(
            os.path.join(FIXTURES, "every_layer.keras"))
        outputs = model.predict(
            {"image": self.outputs["every_layer_images"],
             "label": self.outputs["every_layer_labels"]}, verbose=0)
        for key in ("length", "reconstruction"):
            self.assertAllClose(outputs[key],
                                self.outputs[f"every_layer_{key}"],
                                atol=1e-5)

    def test_every_router_saved_before_the_router_contract(self):
        # Written by `make_router_fixtures.py` with the code of ce1ff98:
        # both hybrids as `DynamicRouting(attention=...)`, couplings and
        # credit read inside the graph in that code's layouts.
        expected = np.load(
            os.path.join(FIXTURES, "routers_before_contract.npz"))
        with self.assertWarns(DeprecationWarning):  # old couplings layout
            model = keras.saving.load_model(
                os.path.join(FIXTURES, "routers_before_contract.keras"))
        for name in ("hybrid_bilinear", "hybrid_concat"):
            self.assertIsInstance(model.get_layer(name),
                                  keras_caps.layers.HybridRouting)
        self.assertEqual(model.get_layer("dynamic").temperature, 0.5)
        self.assertEqual(model.get_layer("hybrid_concat").attention,
                         "concat")
        outputs = model.predict(expected["inputs"], verbose=0)
        for key in ("poses", "couplings", "attention_couplings"):
            self.assertAllClose(outputs[key], expected[key], atol=1e-6)
        # Re-saved, the graph keeps the layouts it was built with.
        path = os.path.join(self.get_temp_dir(), "resaved.keras")
        model.save(path)
        resaved = keras.saving.load_model(path)
        self.assertAllClose(
            resaved.predict(expected["inputs"], verbose=0)["couplings"],
            expected["couplings"], atol=1e-6)
