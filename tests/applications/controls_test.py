"""The comparison's controls: no routing, the CNN ladder, Sabour's CNN.

Every count below is derived by hand from the layer shapes; the numeric
checks compare the models' layers with NumPy written from the papers'
equations.
"""

import os

import keras
import numpy as np
import pytest

from keras_caps import layers
from keras_caps import losses
from keras_caps.applications import MODELS
from keras_caps.applications import POSITION_CNN
from keras_caps.applications import SABOUR_BASELINE_CNN
from keras_caps.applications import VECTOR_CNN
from keras_caps.applications import VECTOR_CNN_DECODER
from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import PositionCNN
from keras_caps.applications import SabourBaselineCNN
from keras_caps.applications import VectorCNN
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.testing import TestCase
from tests.applications import stem_counts

_SHAPE = (16, 16, 1)
_J, _D = 10, 16  # classes, class-vector size


_conv = stem_counts.conv
_dense = stem_counts.dense
# The MNIST stem (130,688) and the primary capsules' window per input
# side, by hand (tests/applications/stem_counts.py).
_STEM = stem_counts.STEM
_WINDOW = stem_counts.WINDOW
# Step 1: 128 window features -> Dense(148) -> Dense(10).
_POSITION_HEAD = _dense(128, 148) + _dense(148, _J)
# Steps 2-3: 128 -> Dense(71) -> Dense(10 * 16).
_VECTOR_HEAD = _dense(128, 71) + _dense(71, _J * _D)


def _decoder(pixels):
    # Efficient-CapsNet's dense decoder: 160 -> 512 -> 1024 -> pixels.
    return _dense(_J * _D, 512) + _dense(512, 1024) + _dense(1024, pixels)


# The capsule models without decoder on MNIST: the stem, the window and
# the class-capsule layer (FCCaps: 10*16*8*16 + 10*16; dynamic routing
# 16*8*10*16).
_CAPSULE_MODELS = (_STEM + _WINDOW[28] + 16 * 8 * _J * _D,
                   _STEM + _WINDOW[28] + 16 * 8 * _J * _D + _J * 16)


def _sabour(side):
    # Three 5x5 convolutions ('same', stride 1: the map stays side x side),
    # then dense 328, 192 and the 10-way softmax.
    return (_conv(5, 1, 256) + _conv(5, 256, 256) + _conv(5, 256, 128)
            + _dense(side * side * 128, 328) + _dense(328, 192)
            + _dense(192, _J))


def _trainable(model):
    return sum(int(np.prod(weight.shape))
               for weight in model.trainable_weights)


def _batch(shape=_SHAPE, reconstruction=False, num=4, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (num,) + shape).astype("float32")
    labels = np.eye(_J, dtype="float32")[np.arange(num) % _J]
    if not reconstruction:
        return images, labels
    return ({"image": images, "label": labels},
            {"length": labels, "reconstruction": images / 255.0})


def _sabour_squash(s):
    norm = np.sqrt(np.sum(s ** 2, axis=-1, keepdims=True))
    return norm ** 2 / (1.0 + norm ** 2) * s / norm


# name -> (builder of a tiny model, whether it has a decoder).
_TINY_MODELS = {
    "uniform": (lambda: CapsuleClassifier(
        "mnist", router="uniform", input_shape=_SHAPE,
        reconstruction=False), False),
    "cnn_positions": (lambda: PositionCNN("mnist", input_shape=_SHAPE),
                      False),
    "cnn_vectors": (lambda: VectorCNN("mnist", input_shape=_SHAPE,
                                      reconstruction=False), False),
    "cnn_vectors_decoder": (lambda: VectorCNN("mnist", input_shape=_SHAPE),
                            True),
    "sabour_cnn": (lambda: SabourBaselineCNN("mnist", input_shape=(4, 4, 1)),
                   False),
}


class UniformRoutingTest(TestCase):
    def test_uniform_is_one_pass_with_uniform_couplings(self):
        # Sabour et al. 2017, Procedure 1 with the couplings never updated:
        # u_hat_j|i = u_i W_ij, c_ij = 1 / J, v_j = squash(sum_i c_ij
        # u_hat_j|i), against NumPy with hand-set weights.
        num_inputs, input_dim, num_classes, dim = 3, 2, 4, 3
        layer = ROUTERS["uniform"].factory(num_classes, dim, num_inputs, {},
                                           "uniform")
        self.assertIsInstance(layer, layers.DynamicRouting)
        self.assertEqual(layer.num_iterations, 1)
        kernel = (np.arange(num_inputs * input_dim * num_classes * dim)
                  .reshape(num_inputs, input_dim, num_classes, dim)
                  % 7 - 3.0) / 4.0
        inputs = np.array([[[0.5, -0.2], [0.1, 0.3], [-0.4, 0.25]],
                           [[0.0, 0.6], [0.2, -0.1], [0.3, 0.3]]],
                          dtype="float32")
        layer.build(inputs.shape)
        layer.kernel.assign(kernel.astype("float32"))
        outputs, couplings = layer(inputs, return_couplings=True)
        votes = np.einsum("bid,idjz->bijz", inputs, kernel)
        expected = _sabour_squash(votes.sum(axis=1) / num_classes)
        self.assertAllClose(outputs, expected, atol=1e-6)
        self.assertAllClose(couplings, np.full(
            (2, 1, num_inputs, num_classes), 1.0 / num_classes))
        # Routing (3 iterations) moves the couplings off uniform: the test
        # tells the two apart.
        routed = layers.DynamicRouting(num_classes, dim)
        routed.build(inputs.shape)
        routed.kernel.assign(kernel.astype("float32"))
        self.assertGreater(np.abs(keras.ops.convert_to_numpy(
            routed(inputs)) - expected).max(), 1e-3)

    def test_uniform_parameters_equal_dynamic(self):
        # The same votes' kernel (16, 8, 10, 16), no bias: 161,664.
        for router in ("uniform", "dynamic"):
            model = CapsuleClassifier("mnist", router=router,
                                      reconstruction=False, compile=False)
            self.assertEqual(_trainable(model),
                             _STEM + _WINDOW[28] + 16 * 8 * _J * _D)
            self.assertEqual(_trainable(model), 161664)
        with_decoder = CapsuleClassifier("mnist", router="uniform",
                                         compile=False)
        self.assertEqual(_trainable(with_decoder),
                         161664 + _decoder(28 * 28))
        self.assertIs(MODELS["uniform"].family.builder.func,
                      CapsuleClassifier)

    def test_uniform_refuses_routing_options(self):
        for options in ({"num_iterations": 3}, {"coupling": "sparsemax"},
                        {"leaky": True}):
            with self.assertRaisesRegex(
                    ValueError, r"router_options.*'uniform'.*1 / "
                    r"num_classes.*Received: router_options="):
                CapsuleClassifier("mnist", router="uniform",
                                  router_options=options, compile=False)


class CNNLadderTest(TestCase):
    def test_pinned_parameters(self):
        # (builder, options, head, with decoder, MNIST count, canvas count)
        cases = [
            (PositionCNN, {}, _POSITION_HEAD, False, 161766, 180198),
            (VectorCNN, {"reconstruction": False}, _VECTOR_HEAD, False,
             161863, 180295),
            (VectorCNN, {}, _VECTOR_HEAD, True, 1573207, 2428039),
        ]
        for builder, kwargs, head, decoder, mnist, canvas in cases:
            for dataset, shape, count in (("mnist", None, mnist),
                                          ("mnist", _SHAPE, None),
                                          ("mnist_canvas", None, canvas)):
                model = builder(dataset, input_shape=shape, compile=False,
                                **kwargs)
                side = model.get_layer("image").output.shape[1]
                expected = _STEM + _WINDOW[side] + head + (
                    _decoder(side * side) if decoder else 0)
                self.assertEqual(_trainable(model), expected)
                if count is not None:
                    self.assertEqual(_trainable(model), count)
        # Matched to the capsule models without decoder (within 0.2 %).
        for count in (161766, 161863):
            for capsules in _CAPSULE_MODELS:
                self.assertLess(abs(count - capsules), 0.002 * capsules)

    def test_position_window_sees_each_position(self):
        # The window is PrimaryCaps' depthwise filter over the whole map:
        # features[b, c] = sum_{h, w} x[b, h, w, c] k[h, w, c] + bias[c].
        model = PositionCNN("mnist", input_shape=_SHAPE, compile=False)
        stem = keras.Model(model.input, model.get_layer(
            "position_window").input)
        features = keras.Model(model.input,
                               model.get_layer("positions").output)
        images, _ = _batch()
        window = model.get_layer("position_window")
        kernel, bias = (keras.ops.convert_to_numpy(w)
                        for w in window.weights)
        stem_map = stem.predict(images, verbose=0)  # (4, 3, 3, 128)
        expected = np.einsum("bhwc,hwc->bc", stem_map, kernel[..., 0]) + bias
        self.assertAllClose(features.predict(images, verbose=0), expected,
                            atol=1e-4)
        self.assertEqual(window.kernel_size, (3, 3))

    def test_vector_scores_are_squashed_lengths(self):
        # Efficient-CapsNet's squash: |v| = 1 - exp(-|s|).
        model = VectorCNN("mnist", input_shape=_SHAPE, reconstruction=False)
        self.assertIsInstance(model.loss, losses.MarginLoss)
        raw = keras.Model(model.input,
                          model.get_layer("class_vectors").output)
        images, _ = _batch()
        s = raw.predict(images, verbose=0).reshape(4, _J, _D)
        expected = 1.0 - np.exp(-np.linalg.norm(s, axis=-1))
        self.assertAllClose(model.predict(images, verbose=0), expected,
                            atol=1e-5)

    def test_registered_for_train_and_decoders(self):
        self.assertIs(MODELS["cnn_positions"].family, POSITION_CNN)
        self.assertIs(MODELS["cnn_vectors"].family, VECTOR_CNN)
        self.assertIs(MODELS["cnn_vectors_decoder"].family,
                      VECTOR_CNN_DECODER)
        self.assertIs(MODELS["sabour_cnn"].family, SABOUR_BASELINE_CNN)
        self.assertEqual({MODELS[name].kind for name in (
            "cnn", "cnn_positions", "cnn_vectors", "cnn_vectors_decoder",
            "sabour_cnn")}, {"control"})
        self.assertFalse(POSITION_CNN.has_decoder)
        self.assertFalse(SABOUR_BASELINE_CNN.has_decoder)
        # The ladder's steps 2 and 3 are two names, one model each: the
        # step without the decoder refuses one, the step with requires it.
        self.assertEqual(
            (VECTOR_CNN.fixed_reconstruction,
             VECTOR_CNN_DECODER.fixed_reconstruction), (False, True))
        self.assertEqual(VECTOR_CNN.build("mnist").name, "cnn_vectors")
        self.assertEqual(VECTOR_CNN_DECODER.build("mnist").name,
                         "cnn_vectors_decoder")
        with self.assertRaisesRegex(ValueError, "no reconstruction decoder"):
            VECTOR_CNN.build("mnist", reconstruction=True)
        with self.assertRaisesRegex(ValueError, "defined by its"):
            VECTOR_CNN_DECODER.build("mnist", reconstruction=False)
        with self.assertRaisesRegex(ValueError, "no decoder"):
            PositionCNN("mnist", reconstruction=True)
        self.assertEqual(VectorCNN("mnist", compile=False).name,
                         "cnn_vectors_decoder")


class SabourBaselineCNNTest(TestCase):
    def test_pinned_parameters(self):
        # 35,445,522 on 28x28 (the paper's 35.4 M), 69,704,466 on 40x40.
        for dataset, side, count in (("mnist", 28, 35445522),
                                     ("mnist_canvas", 40, 69704466)):
            model = SabourBaselineCNN(dataset, compile=False)
            self.assertEqual(model.count_params(), _sabour(side))
            self.assertEqual(model.count_params(), count)
        self.assertEqual(
            SabourBaselineCNN("mnist", input_shape=(8, 8, 1),
                              compile=False).count_params(), _sabour(8))

    def test_bad_arguments(self):
        for kwargs, message in (
                ({"dataset": "smallnorb"}, "smallnorb"),
                ({"dropout": 1.0}, r"`dropout`.*\[0, 1\).*dropout=1.0"),
                ({"reconstruction": True}, "no decoder")):
            with self.assertRaisesRegex(ValueError, message):
                SabourBaselineCNN(**{"compile": False, **kwargs})


@pytest.mark.parametrize("name", sorted(_TINY_MODELS))
def test_training_step_predict_and_round_trip(name, tmp_path):
    build, reconstruction = _TINY_MODELS[name]
    model = build()
    shape = tuple(model.get_layer("image").output.shape[1:])
    inputs, targets = _batch(shape, reconstruction)
    before = [keras.ops.convert_to_numpy(w).copy()
              for w in model.trainable_weights]
    history = model.fit(inputs, targets, batch_size=2, epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 2
    assert np.isfinite(history.history["loss"][0])
    if reconstruction:
        assert "reconstruction_loss" in history.history
    changed = [not np.array_equal(a, keras.ops.convert_to_numpy(b))
               for a, b in zip(before, model.trainable_weights, strict=True)]
    assert changed[0] and changed[-1]  # the stem and the last layer train
    scores = model.predict(inputs, verbose=0)
    scores = scores["length"] if reconstruction else scores
    assert scores.shape == (4, _J)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    again = loaded.predict(inputs, verbose=0)
    np.testing.assert_allclose(
        again["length"] if reconstruction else again, scores, atol=1e-5)

