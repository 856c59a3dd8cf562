import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import VectorRoutingCapsNet
from keras_caps.applications import VectorRoutingHead
from keras_caps.inference import credit_model
from keras_caps.layers import VectorRouting
from keras_caps.testing import TestCase
from tests.layers import vector_routing_reference as reference


def _tiny_routing_model(num_inputs=5, input_dim=4):
    """Hand-built: 5 inputs -> 3 -> 3 -> 2 logits, credits returned."""
    inputs = keras.Input((num_inputs, input_dim), name="inputs")
    x, _ = VectorRouting(3, 4, num_inputs=num_inputs, name="first")(
        inputs, return_credit=True)
    x, _ = VectorRouting(3, 4, num_inputs=3, num_iterations=1,
                         name="second")(x, return_credit=True)
    x, _ = VectorRouting(2, 1, num_inputs=3, num_iterations=3,
                         name="classes")(x, return_credit=True)
    logits = keras.layers.Reshape((2,), name="logits")(x)
    return keras.Model(inputs, logits)


def _by_hand(routings, x, mask=None):
    """Logits and composed credit from eager calls of each routing."""
    phis = []
    for index, routing in enumerate(routings):
        kwargs = {"mask": mask} if index == 0 and mask is not None else {}
        x, phi = routing(x, return_credit=True, **kwargs)
        phis.append(keras.ops.convert_to_numpy(phi))
    logits = keras.ops.convert_to_numpy(x)[..., 0]
    return logits, reference.compose_credit_assignments(phis)


class CreditModelTest(TestCase):
    def test_equals_composing_the_layer_outputs_by_hand(self):
        model = _tiny_routing_model()
        x = np.random.default_rng(3).normal(size=(4, 5, 4))
        x = x.astype("float32")
        logits, credit = credit_model(model)(x)
        self.assertEqual(tuple(credit.shape), (4, 5, 2))
        routings = [model.get_layer(name)
                    for name in ("first", "second", "classes")]
        expected_logits, expected_credit = _by_hand(routings, x)
        self.assertAllClose(logits, expected_logits, atol=1e-5, rtol=1e-5)
        self.assertAllClose(logits, model(x), atol=1e-6)
        self.assertAllClose(credit, expected_credit, atol=1e-4, rtol=1e-4)
        # Per-example scaling: an example's credit ignores the batch.
        _, alone = credit_model(model)(x[1:2])
        self.assertAllClose(alone, credit[1:2], atol=1e-4, rtol=1e-4)

    def test_capsnet_credit_of_each_stem_position(self):
        model = VectorRoutingCapsNet("mnist", input_shape=(12, 12, 1),
                                     num_classes=4, compile=False)
        images = np.random.default_rng(5).uniform(0, 255, (3, 12, 12, 1))
        images = images.astype("float32")
        logits, credit = credit_model(model)(images)
        self.assertEqual(tuple(credit.shape), (3, 9, 4))  # 3 x 3 positions
        positions = keras.Model(model.input,
                                model.get_layer("feature_norm").output)
        routings = [model.get_layer(name)
                    for name in ("routing_1", "routing_2", "class_routing")]
        expected_logits, expected_credit = _by_hand(routings,
                                                    positions(images))
        self.assertAllClose(logits, expected_logits, atol=1e-5, rtol=1e-5)
        self.assertAllClose(credit, expected_credit, atol=1e-4, rtol=1e-4)

    @parameterized.named_parameters(
        ("output", None, 1), ("several_states", ["embedding", "block"], 2))
    def test_head_credit_ignores_padding(self, state_layers, num_states):
        tokens = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(20, 6, mask_zero=True,
                                   name="embedding")(tokens)
        x = keras.layers.Dense(6, activation="tanh", name="block")(x)
        model = VectorRoutingHead(
            keras.Model(tokens, x), 3, hidden_state_layers=state_layers,
            num_hidden_capsules=4, compile=False)
        ids = np.array([[5, 7, 9, 0], [4, 2, 8, 6]], dtype="int32")
        credits = credit_model(model)
        logits, credit = credits(ids)
        self.assertAllClose(logits, model(ids), atol=1e-6)
        self.assertEqual(tuple(credit.shape), (2, 4 * num_states, 3))
        credit = keras.ops.convert_to_numpy(credit).reshape(2, num_states,
                                                            4, 3)
        self.assertAllClose(credit[0, :, 3], np.zeros((num_states, 3)))
        self.assertTrue(np.all(np.abs(credit[1]).sum(axis=-1) > 0))
        # Without the padding the credit is the same up to a positive
        # factor: the composition scales to unit standard deviation over
        # all positions, the padded (zero) ones included.
        _, unpadded = credits(ids[:1, :3])
        unpadded = keras.ops.convert_to_numpy(unpadded).reshape(
            1, num_states, 3, 3)
        padded = credit[:1, :, :3]
        self.assertAllClose(padded / padded.std(), unpadded / unpadded.std(),
                            atol=1e-4, rtol=1e-4)

    def test_mixed_precision_credit_is_finite(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = VectorRoutingCapsNet("mnist", input_shape=(12, 12, 1),
                                     compile=False)
        images = np.random.default_rng(7).uniform(0, 255, (2, 12, 12, 1))
        logits, credit = credit_model(model)(images.astype("float32"))
        self.assertEqual(logits.dtype, "float32")
        self.assertAllFinite([logits, credit])

    def test_bad_models(self):
        with self.assertRaisesRegex(TypeError,
                                    "Received: model='model' of type str"):
            credit_model("model")
        inputs = keras.Input((5, 4))
        dense = keras.Model(inputs, keras.layers.Dense(2, name="dense")(
            inputs))
        with self.assertRaisesRegex(
                ValueError, "`VectorRouting` layers. Received: a model with "
                "layers \\[.*'dense'\\]"):
            credit_model(dense)
        outputs = VectorRouting(2, 1, name="plain")(inputs)
        with self.assertRaisesRegex(
                ValueError, "return_credit=True.*Received: the "
                "routing 'plain' returns no credit"):
            credit_model(keras.Model(inputs, outputs))
        # Couplings (the shares) are not the credit.
        outputs, _ = VectorRouting(2, 1, name="shares")(
            inputs, return_couplings=True)
        with self.assertRaisesRegex(
                ValueError, "routing 'shares' returns no credit"):
            credit_model(keras.Model(inputs, outputs))
        # Both: the credit is the last output.
        outputs, _, credit = VectorRouting(2, 1, name="both")(
            inputs, return_couplings=True, return_credit=True)
        model = keras.Model(inputs, outputs)
        _, found = credit_model(model)(np.ones((1, 5, 4), "float32"))
        self.assertEqual(tuple(found.shape), (1, 5, 2))
