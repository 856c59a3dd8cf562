"""How `CapsuleClassifier`'s head reads each router's class capsules."""

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import CapsuleClassifier
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.testing import TestCase

_SHAPE = (16, 16, 1)
_J, _D = 10, 16  # class capsules


def _images(num=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 255, (num,) + _SHAPE).astype("float32")


def _labels(num=4):
    return np.eye(_J, dtype="float32")[np.arange(num) % _J]


def _outputs(model, names, images):
    """The outputs of the layers `names` of `model` on `images`."""
    probe = keras.Model(model.inputs,
                        [model.get_layer(name).output for name in names])
    outputs = probe.predict(images, verbose=0)
    if len(names) == 1:
        outputs = [outputs]
    return [np.asarray(x, "float64") for x in outputs]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def _efficient_squash(s):
    """Mazzia et al. (2021), Eq. 3: (1 - exp(-|s|)) s / |s|."""
    norm = np.linalg.norm(s, axis=-1, keepdims=True)
    return (1.0 - np.exp(-norm)) * s / norm


class PoseScoreHeadTest(TestCase):
    @parameterized.named_parameters(("inverted_attention",
                                     "inverted_attention"),
                                    ("vector", "vector"))
    def test_capsules_are_pose_directions_scaled_to_the_score(self, router):
        # Against NumPy: score_j = w . pose_j + b (one Dense(1) shared by
        # the classes, Tsai et al.'s linear classifier of the class poses);
        # capsule_j = sigmoid(score_j) pose_j / |pose_j|; length = sigmoid.
        model = CapsuleClassifier("mnist", router=router, input_shape=_SHAPE,
                                  reconstruction=False, compile=False)
        images = _images()
        poses, capsules, lengths = _outputs(
            model, ("routing", "digit_caps", "length"), images)
        kernel, bias = (np.asarray(w, "float64") for w in
                        model.get_layer("class_score").get_weights())
        self.assertEqual(kernel.shape, (_D, 1))  # one score per pose
        scores = _sigmoid(poses @ kernel + bias)  # (batch, J, 1)
        expected = scores * poses / np.linalg.norm(poses, axis=-1,
                                                   keepdims=True)
        self.assertAllClose(capsules, expected, atol=1e-5)
        self.assertAllClose(lengths, scores[..., 0], atol=1e-5)

    def test_inverted_attention_poses_are_layer_normed(self):
        # The router's outputs keep the paper's LayerNorm (initial gain 1,
        # bias 0): each pose has mean 0 over its 16 entries and a norm of
        # sqrt(16 v / (v + eps)) <= 4 for its variance v before the norm.
        model = CapsuleClassifier("mnist", router="inverted_attention",
                                  input_shape=_SHAPE, reconstruction=False,
                                  compile=False)
        (poses,) = _outputs(model, ("routing",), _images())
        self.assertAllClose(poses.mean(-1), np.zeros(poses.shape[:2]),
                            atol=1e-4)
        self.assertLess(np.linalg.norm(poses, axis=-1).max(), 4.0 + 1e-4)

    def test_default_heads(self):
        self.assertEqual(ROUTERS["inverted_attention"].heads,
                         ("pose_score", "layer_norm"))
        self.assertEqual(ROUTERS["vector"].heads,
                         ("pose_score", "unsquashed"))
        self.assertEqual(ROUTERS["self_attention"].heads, ("squashed",))


class LegacyHeadTest(TestCase):
    def test_layer_norm_head_is_the_earlier_head(self):
        # head="layer_norm": the poses scaled by 1 / sqrt(16) and squashed
        # (Efficient-CapsNet's squash), the head of models saved before
        # the "pose_score" head; no "class_score" layer.
        model = CapsuleClassifier("mnist", router="inverted_attention",
                                  head="layer_norm", input_shape=_SHAPE,
                                  reconstruction=False, compile=False)
        self.assertNotIn("class_score",
                         [layer.name for layer in model.layers])
        poses, lengths = _outputs(model, ("routing", "length"), _images())
        expected = np.linalg.norm(_efficient_squash(poses / 4.0), axis=-1)
        self.assertAllClose(lengths, expected, atol=1e-5)

    def test_layer_norm_head_gives_every_class_one_length(self):
        # The diagnosis the pose-score head fixes: with the LayerNorm's
        # initial gain 1 and bias 0 each pose's norm is sqrt(16 v / (v +
        # eps)) for its variance v, so every class length is about
        # 1 - exp(-1) = 0.632 (less where v is near eps) whatever the
        # class; the pose score head's lengths differ between classes.
        images = _images()
        old = CapsuleClassifier("mnist", router="inverted_attention",
                                head="layer_norm", input_shape=_SHAPE,
                                reconstruction=False, compile=False)
        old_lengths = old.predict(images, verbose=0)
        self.assertTrue(np.all(old_lengths <= 1.0 - np.exp(-1.0) + 1e-5))
        self.assertGreater(old_lengths.min(), 0.5)
        new = CapsuleClassifier("mnist", router="inverted_attention",
                                input_shape=_SHAPE, reconstruction=False,
                                compile=False)
        new_lengths = new.predict(images, verbose=0)
        self.assertGreater(new_lengths.std(1).min(),
                           5.0 * old_lengths.std(1).max())

    def test_router_kernel_gets_a_gradient_with_the_pose_score_head(self):
        # One SGD step (learning rate 1) on the margin loss moves the
        # router's kernel by its gradient: under the layer-norm head the
        # class lengths barely depend on it (see above), under the pose
        # score head they do.
        def kernel_step(head):
            keras.utils.set_random_seed(0)
            model = CapsuleClassifier(
                "mnist", router="inverted_attention", head=head,
                input_shape=_SHAPE, reconstruction=False,
                optimizer=keras.optimizers.SGD(1.0), jit_compile=False)
            kernel = model.get_layer("routing").kernel
            before = np.asarray(kernel.numpy(), "float64")
            model.fit(_images(), _labels(), batch_size=4, epochs=1,
                      verbose=0)
            return np.linalg.norm(kernel.numpy() - before)

        new, old = kernel_step(None), kernel_step("layer_norm")
        self.assertGreater(new, 10.0 * old)
        self.assertGreater(new, 0.0)

    @parameterized.named_parameters(
        ("unknown", {"router": "inverted_attention", "head": "logits"},
         r"`head`.*\['pose_score', 'layer_norm'\].*head='logits'"),
        ("not_for_router", {"router": "dynamic", "head": "layer_norm"},
         r"`head`.*\['squashed'\] for router 'dynamic'"),
    )
    def test_bad_head(self, kwargs, message):
        with self.assertRaisesRegex(ValueError, message):
            CapsuleClassifier("mnist", input_shape=_SHAPE, compile=False,
                              **kwargs)
