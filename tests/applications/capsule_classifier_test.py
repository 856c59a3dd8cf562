import os

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import layers
from keras_caps.applications import MODELS
from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import CNNBaseline
from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.testing import TestCase
from tests.applications import stem_counts

_SHAPE = (16, 16, 1)


# Counted by hand from the layer shapes (tests/applications/stem_counts.py):
# the MNIST stem and the primary capsules' window (16 capsules of 8).
_STEM = stem_counts.STEM
_PRIMARY_16 = stem_counts.WINDOW[16]
_PRIMARY_28 = stem_counts.WINDOW[28]  # the preset's window
_N, _D_IN, _J, _D = 16, 8, 10, 16  # primary capsules -> class capsules
_ROUTER_PARAMETERS = {
    # FCCaps: kernel (J, N, D_in, D) and prior (J, N, 1).
    "self_attention": _J * _N * _D_IN * _D + _J * _N,
    # DynamicRouting: kernel (N, D_in, J, D), no bias.
    "dynamic": _N * _D_IN * _J * _D,
    # Uniform couplings: DynamicRouting with one iteration, the same kernel.
    "uniform": _N * _D_IN * _J * _D,
    # InvertedAttentionRouting, vector poses: kernel (N, D_in, J, D) and
    # the LayerNorm's gamma and beta (D each); the head's score Dense(1)
    # shared by the classes (D weights and a bias).
    "inverted_attention": _N * _D_IN * _J * _D + 2 * _D + _D + 1,
    # VectorRouting with num_inputs=N: score kernel (N, D_in) and bias (N,),
    # vote scale (J, D_in), vote kernel (D_in, D), vote bias (J, D),
    # prediction kernel (D, D_in), scale (J, D_in) and bias (J, D_in),
    # similarity scale and bias (N, J), use benefit and ignore cost (N, J);
    # the head's score Dense(1) shared by the classes (D weights, a bias).
    "vector": (_N * _D_IN + _N + _J * _D_IN + _D_IN * _D + _J * _D
               + _D * _D_IN + 2 * _J * _D_IN + 4 * _N * _J + _D + 1),
    # DynamicRouting with the bilinear attention term: W_a (D_in, D) and
    # the weight lambda of the term, a scalar.
    "hybrid": _N * _D_IN * _J * _D + _D_IN * _D + 1,
    # AttentionRouting, 1 head of key size 16: parent queries (1, J, 16),
    # key kernel (D_in, 1, 16) and the votes' kernel (N, D_in, J, D).
    "attention": _J * 16 + _D_IN * 16 + _N * _D_IN * _J * _D,
    # EMRouting, vector inputs: kernel (N, D_in, J, D), beta_u and beta_a
    # (J each).
    "em": _N * _D_IN * _J * _D + 2 * _J,
    # SelfRouting: pose kernel (N, D_in, J, D), routing kernel
    # (N, D_in, J) and routing bias (N, J).
    "self_routing": _N * _D_IN * _J * _D + _N * _D_IN * _J + _N * _J,
}
# Routers whose class scores do not depend on their pose kernel (the
# third weight from the end): self-routing's activations come from the
# routing weights alone, so without a decoder the poses get no gradient.
_POSE_FREE_SCORES = ("self_routing",)
# CNN: global pooling of 128 channels -> Dense(224) -> Dense(10).
_CNN_HEAD = 128 * 224 + 224 + 224 * 10 + 10


def _router_parameters(model, router):
    """The router's pinned count; for a router added since (one file and
    one `ROUTERS` entry, docs/adding-a-router.md), what its layer and the
    head's shared score hold, so the classifier adds nothing else."""
    if router in _ROUTER_PARAMETERS:
        return _ROUTER_PARAMETERS[router]
    names = {layer.name for layer in model.layers}
    parts = ["digit_caps"] + (["class_score"] if "class_score" in names
                              else [])
    return sum(_trainable(model.get_layer(name)) for name in parts)


def _trainable(model):
    return sum(int(np.prod(weight.shape))
               for weight in model.trainable_weights)


def _batch(reconstruction, num=4, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (num,) + _SHAPE).astype("float32")
    labels = np.eye(10, dtype="float32")[np.arange(num) % 10]
    if not reconstruction:
        return images, labels
    return ({"image": images, "label": labels},
            {"length": labels, "reconstruction": images / 255.0})


class CapsuleClassifierTest(TestCase):
    def test_every_router_is_a_registered_model(self):
        self.assertLessEqual(set(_ROUTER_PARAMETERS), set(ROUTERS))
        for router in ROUTERS:
            entry = MODELS[router]
            self.assertEqual(entry.kind, "router")
            self.assertIs(entry.family.builder.func, CapsuleClassifier)
            self.assertEqual(entry.family.builder.keywords,
                             {"router": router})
            self.assertEqual(entry.description, ROUTERS[router].description)

    @parameterized.named_parameters(*[(r, r) for r in ROUTERS])
    def test_pinned_parameters_and_two_training_steps(self, router):
        model = CapsuleClassifier("mnist", router=router, input_shape=_SHAPE,
                                  reconstruction=False)
        self.assertEqual(_trainable(model),
                         _STEM + _PRIMARY_16
                         + _router_parameters(model, router))
        capsules = model.get_layer("digit_caps").output
        self.assertEqual(tuple(capsules.shape), (None, _J, _D))
        images, labels = _batch(False)
        before = [w.numpy().copy() for w in model.trainable_weights]
        history = model.fit(images, labels, batch_size=2, epochs=1,
                            verbose=0)
        self.assertEqual(model.optimizer.iterations.numpy(), 2)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        changed = [not np.array_equal(a, b.numpy()) for a, b in
                   zip(before, model.trainable_weights, strict=True)]
        trained = changed[-2:] if router in _POSE_FREE_SCORES else (
            changed[-3:])
        self.assertTrue(all(trained))  # the router's weights train
        scores = model.predict(images, verbose=0)
        # Squashed class capsules: lengths in [0, 1), and not saturated
        # (LayerNormed capsules squashed unscaled have lengths ~0.98). The
        # pose-score head's lengths are sigmoids of linear scores: in
        # (0, 1), up to ~0.95 at initialisation (logits of std ~1.4).
        upper = 1.0 if ROUTERS[router].outputs == "pose_score" else 0.95
        self.assertTrue(np.all((scores >= 0) & (scores < upper)))

    def test_a_thousand_classes_train(self):
        # The class capsules grow with the classes, the stem does not;
        # class ids above 255 train as any other. (benchmarks/
        # classes_scaling.py measures every router's time and memory.)
        model = CapsuleClassifier("mnist", router="dynamic",
                                  input_shape=_SHAPE, num_classes=1000,
                                  reconstruction=False, jit_compile=False)
        self.assertEqual(_trainable(model),
                         _STEM + _PRIMARY_16 + _N * _D_IN * 1000 * _D)
        images, _ = _batch(False)
        labels = np.eye(1000, dtype="float32")[[0, 255, 256, 999]]
        history = model.fit(images, labels, batch_size=2, epochs=1,
                            verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        scores = model.predict(images, verbose=0)
        self.assertEqual(scores.shape, (4, 1000))
        self.assertTrue(np.all(np.isfinite(scores)))

    def test_vector_routing_outputs_are_not_normalized(self):
        # Its LayerNorm has no affine weights: every class capsule would
        # have the same length, and the lengths no class information.
        model = CapsuleClassifier("mnist", router="vector",
                                  input_shape=_SHAPE, reconstruction=False,
                                  compile=False)
        self.assertFalse(model.get_layer("routing").normalize)
        scores = model.predict(_batch(False)[0], verbose=0)
        self.assertGreater(scores.std(axis=1).min(), 1e-3)

    def test_preset_parameters_on_mnist(self):
        for router, count in _ROUTER_PARAMETERS.items():
            model = CapsuleClassifier("mnist", router=router,
                                      reconstruction=False, compile=False)
            self.assertEqual(_trainable(model), _STEM + _PRIMARY_28 + count,
                             router)

    def test_self_attention_is_efficient_capsnet(self):
        # Same weights in the same layers give the same scores.
        ours = CapsuleClassifier("mnist", input_shape=_SHAPE,
                                 reconstruction=False, compile=False)
        theirs = EfficientCapsNet("mnist", input_shape=_SHAPE,
                                  reconstruction=False, compile=False)
        theirs.set_weights(ours.get_weights())
        images, _ = _batch(False)
        self.assertAllClose(ours.predict(images, verbose=0),
                            theirs.predict(images, verbose=0), atol=1e-6)

    def test_decoder_trains_and_inference_model(self):
        model = CapsuleClassifier("mnist", router="vector",
                                  input_shape=_SHAPE)
        inputs, targets = _batch(True)
        history = model.fit(inputs, targets, batch_size=2, epochs=1,
                            verbose=0)
        self.assertIn("reconstruction_loss", history.history)
        scores = inference_model(model).predict(inputs["image"], verbose=0)
        self.assertEqual(scores.shape, (4, 10))

    def test_router_options_reach_the_layer(self):
        model = CapsuleClassifier(
            "mnist", router="dynamic", input_shape=_SHAPE,
            router_options={"num_iterations": 2, "use_bias": True},
            reconstruction=False, compile=False)
        layer = model.get_layer("digit_caps")
        self.assertIsInstance(layer, layers.DynamicRouting)
        self.assertEqual(layer.num_iterations, 2)
        self.assertEqual(_trainable(model), _STEM + _PRIMARY_16
                         + _ROUTER_PARAMETERS["dynamic"] + _J * _D)

    def test_keras_round_trip(self):
        model = CapsuleClassifier("mnist", router="inverted_attention",
                                  input_shape=_SHAPE, reconstruction=False)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        images, _ = _batch(False)
        self.assertAllClose(
            keras.saving.load_model(path).predict(images, verbose=0),
            model.predict(images, verbose=0), atol=1e-6)

    @parameterized.named_parameters(
        ("router", {"router": "no_such_router"}, ValueError,
         "`router`.*dynamic"),
        ("options", {"router": "dynamic",
                     "router_options": {"iterations": 3}}, ValueError,
         "Unknown `router_options` for router 'dynamic'.*iterations"),
        ("options_type", {"router_options": [3]}, TypeError,
         "`router_options`.*dict"),
        ("dataset", {"dataset": "cifar10"}, ValueError, "cifar10"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        with self.assertRaisesRegex(error, message):
            CapsuleClassifier(**kwargs)


class CNNBaselineTest(TestCase):
    def test_pinned_parameters_and_two_training_steps(self):
        model = CNNBaseline("mnist", input_shape=_SHAPE)
        self.assertEqual(_trainable(model), _STEM + _CNN_HEAD)
        # Close to the capsule models on MNIST (within 0.01 %).
        capsules = _STEM + _PRIMARY_28 + _ROUTER_PARAMETERS["self_attention"]
        self.assertLess(abs(_STEM + _CNN_HEAD - capsules), 0.0001 * capsules)
        images, labels = _batch(False)
        model.fit(images, labels, batch_size=2, epochs=1, verbose=0)
        self.assertEqual(model.optimizer.iterations.numpy(), 2)
        probabilities = model.predict(images, verbose=0)
        self.assertAllClose(probabilities.sum(axis=1), np.ones(4), atol=1e-5)

    def test_no_decoder(self):
        with self.assertRaisesRegex(ValueError, "no decoder"):
            CNNBaseline("mnist", reconstruction=True)
        self.assertFalse(MODELS["cnn"].family.has_decoder)
