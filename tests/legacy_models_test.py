"""Files saved by keras_caps 0.1.0 before the router contract are refused.

The fixtures in `tests/legacy_models/` are real files of that code:
`efficient_capsnet_16x16.keras` (a compiled EfficientCapsNet) and
`every_layer.keras` (a tiny graph with every capsule layer and router of
the time), saved with the code of commit 7b85966, before the routers had a
temperature; `routers_before_contract.keras` (every router, both hybrids as
`DynamicRouting(attention=...)`), saved with the code of ce1ff98, the last
before the `Router` base class. keras_caps 0.2.0 loads none of them: each
router config, and each router's weights, is refused with one line naming
what wrote it.
"""

import json
import os
import warnings
import zipfile

import keras
from absl.testing import parameterized

from keras_caps import applications
from keras_caps.layers import Router
from keras_caps.testing import TestCase

FIXTURES = os.path.join(os.path.dirname(__file__), "legacy_models")
BEFORE_TEMPERATURE = ("efficient_capsnet_16x16.keras", "every_layer.keras")
BEFORE_CONTRACT = "routers_before_contract.keras"
REFUSAL = ("was saved by keras_caps 0.1.0 before the router contract "
           r"\(its config has {}\); keras_caps 0.2.0 does not load such "
           "files: build the model with keras_caps 0.2.0 and train it "
           "again.")
NO_TEMPERATURE = "neither `temperature` nor `couplings_layout`"
NO_LAYOUT = "no `couplings_layout`"


def _router_configs(name):
    """The serialized router layers of fixture `name`, by layer name."""
    with zipfile.ZipFile(os.path.join(FIXTURES, name)) as archive:
        config = json.loads(archive.read("config.json"))
    routers = {}
    for layer in config["config"]["layers"]:
        cls = keras.saving.get_registered_object(layer["registered_name"])
        if isinstance(cls, type) and issubclass(cls, Router):
            routers[layer["config"]["name"]] = layer
    return routers


class LegacyModelsTest(TestCase):
    @parameterized.parameters(
        (BEFORE_TEMPERATURE[0], "digit_caps", NO_TEMPERATURE),
        (BEFORE_TEMPERATURE[1], "fc_caps", NO_TEMPERATURE),
        (BEFORE_CONTRACT, "vector", NO_LAYOUT))
    def test_load_model_refuses_the_file(self, name, first_router,
                                         evidence):
        with self.assertRaisesRegex(
                ValueError, f"^The `[A-Za-z]+` layer {first_router!r} "
                f"{REFUSAL.format(evidence)}$"):
            keras.saving.load_model(os.path.join(FIXTURES, name))

    @parameterized.parameters(
        (BEFORE_TEMPERATURE[1], NO_TEMPERATURE,
         ["dynamic_routing", "fc_caps", "inverted_attention",
          "vector_routing"]),
        (BEFORE_CONTRACT, NO_LAYOUT,
         ["dynamic", "fc_caps", "hybrid_bilinear", "hybrid_concat",
          "inverted", "vector"]))
    def test_every_router_config_is_refused(self, name, evidence, routers):
        configs = _router_configs(name)
        self.assertContainsSubset(routers, configs)
        for router in routers:
            layer = configs[router]
            with self.assertRaisesRegex(
                    ValueError, f"^The `{layer['class_name']}` layer "
                    f"{router!r} {REFUSAL.format(evidence)}$"):
                keras.saving.deserialize_keras_object(layer)

    def test_a_hybrid_saved_as_dynamic_routing_is_refused(self):
        # Before `HybridRouting` the hybrid was `DynamicRouting(attention=
        # ...)`: its config is a `DynamicRouting` one, refused as such.
        layer = _router_configs(BEFORE_CONTRACT)["hybrid_concat"]
        self.assertEqual(layer["config"]["attention"], "concat")
        with self.assertRaisesRegex(ValueError, "^The `DynamicRouting` "
                                    "layer 'hybrid_concat' was saved by "
                                    "keras_caps 0.1.0"):
            keras.saving.deserialize_keras_object(layer)

    def test_weights_without_the_temperature_are_refused(self):
        # The weights of the 0.1.0 EfficientCapsNet, loaded into the same
        # model built today: every router variable but the temperature.
        folder = self.get_temp_dir()
        with zipfile.ZipFile(os.path.join(
                FIXTURES, BEFORE_TEMPERATURE[0])) as archive:
            path = archive.extract("model.weights.h5", folder)
        model = applications.EfficientCapsNet(
            "mnist", input_shape=(16, 16, 1), reconstruction=False)
        with self.assertRaisesRegex(
                ValueError, "The weights of `FCCaps` layer 'digit_caps' "
                "were saved by keras_caps 0.1.0 before routers had a "
                r"temperature \(every variable but `temperature`\); "
                "keras_caps 0.2.0 does not load such files: build the "
                "model with keras_caps 0.2.0 and train it again.\n"):
            with warnings.catch_warnings():
                # Keras 3.15 on the file's layout of its functional graph.
                warnings.filterwarnings("ignore", "Skipping nested container",
                                        UserWarning)
                model.load_weights(path)
