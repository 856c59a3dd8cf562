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
