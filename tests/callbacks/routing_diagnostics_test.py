import csv
import os

import keras
import numpy as np

from keras_caps import layers
from keras_caps.callbacks import RoutingDiagnostics
from keras_caps.diagnostics import routing_layer_diagnostics
from keras_caps.testing import TestCase


def _model():
    keras.utils.set_random_seed(0)
    children = keras.Input((6, 4), name="capsules")
    parents = layers.AttentionRouting(3, 4, num_heads=2, key_dim=2,
                                      num_iterations=2,
                                      name="routing")(children)
    model = keras.Model(children, layers.Length()(parents))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    return model


class RoutingDiagnosticsCallbackTest(TestCase):
    def test_logs_each_epoch_into_the_csv(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(8, 6, 4)).astype("float32")
        y = rng.uniform(size=(8, 3)).astype("float32")
        model = _model()
        path = os.path.join(self.get_temp_dir(), "history.csv")
        history = model.fit(
            x, y, epochs=2, batch_size=4, verbose=0,
            callbacks=[RoutingDiagnostics(x[:4]),
                       keras.callbacks.CSVLogger(path)])
        with open(path) as file:
            rows = list(csv.DictReader(file))
        self.assertLen(rows, 2)
        keys = ["routing_routing_entropy", "routing_routing_entropy_head_0",
                "routing_routing_entropy_head_1",
                "routing_routing_top3_concentration",
                "routing_routing_geometric_agreement_1",
                "routing_routing_geometric_agreement_2"]
        for key in keys:
            self.assertIn(key, rows[0])
            self.assertLen(history.history[key], 2)
        # The last epoch's values are those of the trained model.
        found = routing_layer_diagnostics(model, x[:4])["routing"]
        last = rows[-1]
        self.assertAllClose(float(last["routing_routing_entropy_head_1"]),
                            found["entropy_per_head"][1], atol=1e-5)
        self.assertAllClose(
            float(last["routing_routing_geometric_agreement_2"]),
            found["geometric_agreement"][1], atol=1e-5, rtol=1e-5)
        self.assertAllClose(
            float(last["routing_routing_top3_concentration"]),
            np.mean(found["top3_concentration"]), atol=1e-6)
        # Training changed the routing between the two epochs.
        self.assertNotEqual(rows[0]["routing_routing_entropy"],
                            rows[1]["routing_routing_entropy"])

    def test_config_round_trip(self):
        callback = RoutingDiagnostics(np.ones((2, 6, 4)), ["routing"], "r")
        revived = RoutingDiagnostics(**callback.get_config())
        self.assertAllClose(revived.inputs, np.ones((2, 6, 4)))
        self.assertEqual((revived.layer_names, revived.prefix),
                         (["routing"], "r"))

    def test_errors(self):
        with self.assertRaisesRegex(TypeError, "`layer_names`"):
            RoutingDiagnostics(np.zeros((1, 6, 4)), layer_names=[3])
        with self.assertRaisesRegex(TypeError, "`prefix`"):
            RoutingDiagnostics(np.zeros((1, 6, 4)), prefix=None)
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        callback = RoutingDiagnostics(np.zeros((1, 4)))
        callback.set_model(model)
        with self.assertRaisesRegex(ValueError, "no routing layer"):
            callback.diagnostics()
