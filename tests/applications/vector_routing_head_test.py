import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import VectorRoutingHead
from keras_caps.layers import VectorRouting
from keras_caps.testing import TestCase

WIDTH = 8
NUM_CLASSES = 3
# Tokens 0 are padding; the two rows have 3 and 5 real tokens.
TOKENS = np.array([[5, 7, 9, 0, 0], [4, 2, 8, 6, 3]], dtype="int32")
LABELS = np.array([0, 2])


def _num_trainable(layer):
    """Trainable scalars: the pinned paper counts (no routing temperature)."""
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


def _sequence_backbone():
    """Variable-length tokens -> (batch, n, WIDTH), with a padding mask."""
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(20, WIDTH, mask_zero=True,
                               name="embedding")(tokens)
    x = keras.layers.Dense(WIDTH, activation="tanh", name="block_1")(x)
    x = keras.layers.Dense(WIDTH, activation="tanh", name="block_2")(x)
    return keras.Model(tokens, x, name="sequence_backbone")


def _feature_map_backbone():
    """(6, 6, 3) images -> feature maps (3, 3, WIDTH) twice."""
    images = keras.Input((6, 6, 3), name="pixels")
    x = keras.layers.Conv2D(WIDTH, 3, strides=2, padding="same",
                            name="conv_1")(images)
    x = keras.layers.Conv2D(WIDTH, 3, padding="same", activation="relu",
                            name="conv_2")(x)
    return keras.Model(images, x, name="feature_map_backbone")


def _train_one_step(model, x, y):
    # Eagerly: tracing the training graph costs several seconds per model
    # on a busy 2-core machine. `predict` still runs the traced graph.
    model.run_eagerly = True
    return model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)


def _head(backbone, **kwargs):
    kwargs.setdefault("num_hidden_capsules", 4)
    return VectorRoutingHead(backbone, NUM_CLASSES, **kwargs)


class VectorRoutingHeadTest(TestCase):
    @parameterized.named_parameters(
        ("output", None),
        ("several_states", ["embedding", "block_1", "block_2"]))
    def test_sequence_backbone_trains_and_predicts(self, state_layers):
        model = _head(_sequence_backbone(), hidden_state_layers=state_layers)
        self.assertTrue(model.compiled)
        self.assertEqual(model.output_shape, (None, NUM_CLASSES))
        routing = model.get_layer("routing_1")
        self.assertIsNone(routing.num_inputs)
        self.assertEqual(routing.capsule_dim, WIDTH)  # the backbone's width
        self.assertEqual(model.get_layer("routing_2").num_inputs, 4)
        self.assertEqual(model.get_layer("class_routing").num_inputs, 4)
        num_states = len(state_layers or [None])
        for index in range(1, num_states + 1):
            self.assertIsInstance(model.get_layer(f"state_norm_{index}"),
                                  keras.layers.LayerNormalization)
        history = _train_one_step(model, TOKENS, LABELS)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("accuracy", history.history)
        self.assertEqual(model.predict(TOKENS, verbose=0).shape,
                         (2, NUM_CLASSES))

    @parameterized.named_parameters(
        ("output", None), ("several_states", ["embedding", "block_2"]))
    def test_padding_does_not_change_the_logits(self, state_layers):
        model = _head(_sequence_backbone(), hidden_state_layers=state_layers,
                      compile=False)
        padded = model(TOKENS)
        unpadded = model(TOKENS[:1, :3])
        self.assertAllClose(padded[:1], unpadded, atol=1e-5, rtol=1e-5)
        more_padding = model(np.pad(TOKENS, ((0, 0), (0, 4))))
        self.assertAllClose(more_padding, padded, atol=1e-5, rtol=1e-5)

    @parameterized.named_parameters(
        ("output", None, 9), ("several_states", ["conv_1", "conv_2"], 18))
    def test_feature_map_backbone(self, state_layers, num_positions):
        model = _head(_feature_map_backbone(),
                      hidden_state_layers=state_layers, num_hidden_routings=1,
                      hidden_capsule_dim=5, num_iterations=3)
        self.assertEqual(
            tuple(model.get_layer("routing_1").input.shape),
            (None, num_positions, WIDTH))
        self.assertEqual(model.get_layer("routing_1").capsule_dim, 5)
        self.assertNotIn("routing_2", [layer.name for layer in model.layers])
        images = np.random.default_rng(0).uniform(size=(2, 6, 6, 3))
        history = _train_one_step(model, images, LABELS)
        self.assertAllFinite(history.history["loss"])
        self.assertEqual(model.predict(images, verbose=0).shape,
                         (2, NUM_CLASSES))

    def test_paper_head_parameter_counts(self):
        # The paper's head on a 24-layer backbone of width d = 1024
        # (`RoutingHead` in models.py of glassroom/heinsen_routing_2022_paper):
        # 25 hidden states (embeddings + 24 layers); LayerNorm scale and
        # bias 25 * 2 * 1024 = 51,200. `VectorRouting` weights, n inputs,
        # n_out outputs:
        # - variable n: score kernel and bias d_in + 1; vote scale, kernel
        #   and bias n_out*d_in + d_in*d_out + n_out*d_out; prediction
        #   kernel, scale and bias d_out*d_in + 2*n_out*d_in; similarity
        #   scale and bias 2*n_out; use benefit and ignore cost Dense layers
        #   2*(d_in*n_out + n_out). variable -> 64, 1024 -> 1024:
        #   1,025 + 65,536 + 1,048,576 + 65,536 + 1,048,576 + 131,072 + 128
        #   + 131,200 = 2,491,649.
        # - fixed n: n*d_in + n + 3*n_out*d_in + 2*d_in*d_out + n_out*d_out
        #   + 4*n*n_out. 64 -> 64, 1024 -> 1024: 65,536 + 64 + 196,608
        #   + 2,097,152 + 65,536 + 16,384 = 2,441,280; 64 -> C logits,
        #   1024 -> 1: 65,536 + 64 + 3,072*C + 2,048 + C + 256*C
        #   = 67,648 + 3,329*C.
        # C = 10: 51,200 + 2,491,649 + 2,441,280 + 100,938 = 5,085,067.
        states = keras.Input((None, 1024), name="embeddings")
        x = states
        for index in range(1, 25):
            x = keras.layers.Activation("linear", name=f"layer_{index}")(x)
        backbone = keras.Model(states, x)
        names = ["embeddings"] + [f"layer_{i}" for i in range(1, 25)]
        model = VectorRoutingHead(backbone, 10, hidden_state_layers=names,
                                  compile=False)
        # Trainable counts: the routing temperatures are not parameters.
        self.assertEqual(_num_trainable(model.get_layer("routing_1")),
                         2_491_649)
        self.assertEqual(_num_trainable(model.get_layer("routing_2")),
                         2_441_280)
        self.assertEqual(_num_trainable(model.get_layer("class_routing")),
                         67_648 + 3_329 * 10)
        self.assertEqual(_num_trainable(model), 5_085_067)
        self.assertEqual(model.count_params(), 5_085_067 + 3)

    def test_compile_options(self):
        model = _head(_sequence_backbone())
        self.assertIsInstance(model.loss,
                              keras.losses.SparseCategoricalCrossentropy)
        self.assertTrue(model.loss.from_logits)
        self.assertIsInstance(model.optimizer, keras.optimizers.Adam)
        self.assertAllClose(model.optimizer.learning_rate, 1e-3)
        self.assertFalse(_head(_sequence_backbone(), compile=False).compiled)
        one_hot = _head(
            _sequence_backbone(), optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.CategoricalCrossentropy(from_logits=True))
        history = _train_one_step(one_hot, TOKENS,
                                  np.eye(NUM_CLASSES)[LABELS])
        self.assertIn("accuracy", history.history)
        self.assertIsInstance(one_hot.optimizer, keras.optimizers.SGD)

    def test_frozen_backbone(self):
        backbone = _sequence_backbone()
        backbone.trainable = False
        model = _head(backbone)
        frozen = model.get_layer("block_1").get_weights()
        _train_one_step(model, TOKENS, LABELS)
        self.assertAllClose(model.get_layer("block_1").get_weights()[0],
                            frozen[0])

    def test_keras_round_trip(self):
        model = _head(_sequence_backbone(),
                      hidden_state_layers=["embedding", "block_2"])
        restored = self.run_model_saving_test(model, TOKENS, atol=1e-5,
                                              rtol=1e-5)
        self.assertIsInstance(restored.get_layer("routing_1"),
                              VectorRouting)
        self.assertAllClose(restored(TOKENS[:1, :3]), model(TOKENS[:1, :3]),
                            atol=1e-5, rtol=1e-5)

    def test_mixed_precision_logits_stay_float32(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = _head(_sequence_backbone(),
                      hidden_state_layers=["embedding", "block_2"])
        self.assertEqual(model.output.dtype, "float32")
        self.assertEqual(model.get_layer("routing_1").compute_dtype,
                         "float16")
        self.assertEqual(model.get_layer("class_routing").compute_dtype,
                         "float32")
        self.assertIsInstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        history = _train_one_step(model, TOKENS, LABELS)
        self.assertAllFinite(history.history["loss"])
        self.assertAllFinite(model.predict(TOKENS, verbose=0))
        for weight in model.weights:
            self.assertEqual(weight.dtype, "float32")

    @parameterized.named_parameters(
        ("backbone_type", {"backbone": "bert"}, TypeError,
         "`backbone`.*Received: backbone='bert' of type str"),
        ("one_class", {"num_classes": 1}, ValueError,
         "`num_classes`.*at least 2.*Received: num_classes=1"),
        ("classes_type", {"num_classes": 2.0}, TypeError,
         "`num_classes`.*Received: num_classes=2.0"),
        ("one_hidden", {"num_hidden_capsules": 1}, ValueError,
         "Received: num_hidden_capsules=1"),
        ("hidden_dim", {"hidden_capsule_dim": 0}, ValueError,
         "Received: hidden_capsule_dim=0"),
        ("routings", {"num_hidden_routings": 0}, ValueError,
         "Received: num_hidden_routings=0"),
        ("iterations", {"num_iterations": 0}, ValueError,
         "Received: num_iterations=0"),
        ("layers_type", {"hidden_state_layers": "block_1"}, TypeError,
         "`hidden_state_layers`.*Received: hidden_state_layers='block_1'"),
        ("unknown_layer", {"hidden_state_layers": ["block_1", "block_9"]},
         ValueError, "no layers named \\['block_9'\\].*Received: "
         "hidden_state_layers=\\['block_1', 'block_9'\\]"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        kwargs = {"backbone": _sequence_backbone(),
                  "num_classes": NUM_CLASSES, **kwargs}
        with self.assertRaisesRegex(error, message):
            VectorRoutingHead(**kwargs)

    def test_bad_backbone_shapes(self):
        vectors = keras.Input((6,))
        dense = keras.Model(vectors, keras.layers.Dense(4)(vectors))
        with self.assertRaisesRegex(
                ValueError, "sequences \\(batch, n, d\\) or feature maps.*"
                "Received: shapes=\\[\\(None, 4\\)\\]"):
            VectorRoutingHead(dense, NUM_CLASSES)
        tokens = keras.Input((None,), dtype="int32")
        embedded = keras.layers.Embedding(20, 8, name="embedding")(tokens)
        wider = keras.layers.Dense(12, name="wider")(embedded)
        backbone = keras.Model(tokens, wider)
        with self.assertRaisesRegex(
                ValueError, "one known last dimension.*Received: shapes="
                "\\[\\(None, None, 8\\), \\(None, None, 12\\)\\]"):
            VectorRoutingHead(backbone, NUM_CLASSES,
                              hidden_state_layers=["embedding", "wider"])
