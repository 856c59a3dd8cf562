import keras
import numpy as np

from keras_caps import callbacks
from keras_caps import diagnostics
from keras_caps import layers
from keras_caps.testing import TestCase


def _stack_model():
    """Primary capsules routed by a two-layer stack (routers nested)."""
    capsules = keras.Input((6, 4), name="image")
    stack = layers.InvertedAttentionRoutingStack(
        [layers.InvertedAttentionRouting(4, 4, pose="vector", name="hidden"),
         layers.InvertedAttentionRouting(3, 4, pose="vector", name="classes")],
        name="stack")
    return keras.Model(capsules, layers.Length()(stack(capsules)))


class RouterSearchTest(TestCase):
    def test_finds_routers_at_any_depth_in_layer_order(self):
        capsules = keras.Input((6, 4), name="image")
        hidden = layers.FCCaps(5, 4, name="first")(capsules)
        inner = keras.Model(capsules, layers.DynamicRouting(
            3, 4, name="second")(hidden), name="inner")
        outer_input = keras.Input((6, 4), name="image")
        model = keras.Model(outer_input, inner(outer_input))
        names = [layer.name for layer in diagnostics.find_routers(model)]
        self.assertEqual(names, ["first", "second"])
        self.assertEqual(
            diagnostics.find_routers(model, top_level_only=True), [])
        stacked = [layer.name for layer in diagnostics.find_routers(
            _stack_model())]
        self.assertEqual(stacked, ["hidden", "classes"])

    def test_bad_model(self):
        with self.assertRaisesRegex(TypeError, "`keras.Model`.*Received"):
            diagnostics.find_routers(layers.FCCaps(3, 4))

    def test_nested_routers_fail_before_training(self):
        model = _stack_model()
        with self.assertRaisesRegex(ValueError,
                                    "nested.*\\['hidden', 'classes'\\]"):
            diagnostics.diagnosable_routers(model)
        model.compile(optimizer="sgd", loss="mse")
        images = np.ones((4, 6, 4), "float32")
        epochs = []
        progress = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: epochs.append(epoch))
        with self.assertRaisesRegex(ValueError, "nested"):
            model.fit(images, np.ones((4, 3)), epochs=1, verbose=0,
                      callbacks=[callbacks.RoutingDiagnostics(images),
                                 progress])
        self.assertEqual(epochs, [])  # failed before the first epoch

    def test_unknown_layer_name(self):
        capsules = keras.Input((6, 4), name="image")
        model = keras.Model(capsules, layers.FCCaps(3, 4, name="classes")(
            capsules))
        self.assertEqual(
            [r.name for r in diagnostics.diagnosable_routers(model)],
            ["classes"])
        with self.assertRaisesRegex(
                ValueError, "`layer_names`.*\\['classes'\\].*\\['nope'\\]"):
            diagnostics.diagnosable_routers(model, ["nope"])
