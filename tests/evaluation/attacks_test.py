import functools
import gc
import os
import subprocess
import sys
import weakref

import keras
import numpy as np
import pytest

from keras_caps.evaluation import attacks
from keras_caps.testing import TestCase
from tests.evaluation import attack_models as models

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# Every test attacks 4 images of 4x4x1 pixels with these models, built
# once: each new model, batch shape or setting traces the step anew.
IMAGES = np.random.default_rng(0).uniform(0, 255, (4, 4, 4, 1)).astype(
    "float32")
LABELS = np.array([0, 1, 2, 0])


@functools.cache
def _linear():
    return models.linear_model(np.random.default_rng(1))


@functools.cache
def _capsules(router_name="dynamic"):
    return models.capsule_model(router_name)


def _accuracy(model, images, labels):
    scores = attacks._to_numpy(model(images, training=False))
    return float(np.mean(np.argmax(scores, -1) == labels))


class FgsmTest(TestCase):
    def _check(self, loss, norm):
        model, kernel, bias = _linear()
        images = IMAGES.copy()
        images[0, 0, 0, 0], images[1, 1, 1, 0] = 0.0, 255.0  # clipped
        gradient = models.linear_gradient(images, LABELS, kernel, bias, loss)
        if norm == "linf":
            step = 0.1 * 255 * np.sign(gradient)
        else:  # epsilon * 255 * sqrt(16 pixels) along the gradient
            length = np.sqrt(np.sum(gradient ** 2, axis=(1, 2, 3),
                                    keepdims=True))
            step = 0.1 * 255 * 4 * gradient / length
        expected = np.clip(images + step, 0, 255)
        self.assertGreater(np.abs(step).min(), 0)
        adversarial = attacks.adversarial_images(
            model, images, LABELS, epsilon=0.1, method="fgsm", norm=norm,
            loss=loss)
        self.assertEqual(adversarial.dtype, np.float32)
        self.assertEqual(adversarial.shape, images.shape)
        self.assertAllClose(adversarial, expected, atol=2e-3, rtol=0)

    def test_sign_gradient_of_a_linear_model(self):
        for loss in attacks.LOSSES:
            with self.subTest(loss=loss):
                self._check(loss, "linf")

    def test_l2_step_of_a_linear_model(self):
        self._check("cross_entropy", "l2")

    def test_gradients_against_the_closed_form(self):
        model, kernel, bias = _linear()
        for loss in attacks.LOSSES:
            _, gradients = attacks.attack_gradients(model, IMAGES, LABELS,
                                                    loss=loss)
            self.assertAllClose(
                gradients, models.linear_gradient(IMAGES, LABELS, kernel,
                                                  bias, loss),
                atol=1e-5, rtol=1e-4)


    def test_cross_entropy_of_a_softmax_model_is_minus_log_p(self):
        # The same linear scores through a softmax layer named like
        # CNNBaseline's: -log p_t has the gradient of the cross-entropy
        # of the logits.
        _, kernel, bias = _linear()
        model = keras.Sequential([
            keras.Input((4, 4, 1)), keras.layers.Flatten(),
            keras.layers.Dense(models.NUM_CLASSES, activation="softmax",
                               name="probabilities")])
        model.get_layer("probabilities").set_weights([kernel, bias])
        losses, gradients = attacks.attack_gradients(
            model, IMAGES, LABELS, loss="cross_entropy")
        scores = IMAGES.reshape(4, -1) @ kernel + bias
        log_p = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
        self.assertAllClose(losses, -log_p[np.arange(4), LABELS],
                            atol=1e-5, rtol=1e-5)
        self.assertAllClose(
            gradients, models.linear_gradient(IMAGES, LABELS, kernel, bias,
                                              "cross_entropy"),
            atol=1e-5, rtol=1e-4)


class PgdTest(TestCase):
    def test_linf_and_l2_projection_against_numpy(self):
        rng = np.random.default_rng(3)
        clean = rng.uniform(0, 255, (5, 3, 3, 2)).astype("float32")
        moved = (clean + rng.normal(0, 60, clean.shape)).astype("float32")
        radius = np.float32(20.0)
        delta = np.clip(moved - clean, -radius, radius)
        self.assertAllClose(
            attacks._to_numpy(attacks._project(
                keras.ops.convert_to_tensor(moved),
                keras.ops.convert_to_tensor(clean), radius, "linf")),
            np.clip(clean + delta, 0, 255), atol=1e-4, rtol=0)
        # L2: images 0-2 outside the ball (rescaled), 3-4 inside (kept).
        radius = np.float32(150.0)
        moved[3:] = clean[3:] + (moved[3:] - clean[3:]) * 0.1
        delta = (moved - clean).astype("float64")
        norms = np.sqrt(np.sum(delta ** 2, axis=(1, 2, 3), keepdims=True))
        self.assertTrue(np.all(norms[:3] > radius))
        self.assertTrue(np.all(norms[3:] < radius))
        expected = np.clip(clean + delta * np.minimum(1, radius / norms),
                           0, 255)
        projected = attacks._to_numpy(attacks._project(
            keras.ops.convert_to_tensor(moved),
            keras.ops.convert_to_tensor(clean), radius, "l2"))
        self.assertAllClose(projected, expected, atol=1e-3, rtol=0)

    def test_pgd_stays_in_the_ball_and_the_pixel_range(self):
        model, _ = _capsules()
        for norm, bound in (("linf", 0.05 * 255), ("l2", 0.05 * 255 * 4)):
            adversarial = attacks.adversarial_images(
                model, IMAGES, LABELS, epsilon=0.05, norm=norm, steps=3)
            delta = (adversarial - IMAGES).reshape(4, -1)
            size = (np.abs(delta).max(-1) if norm == "linf"
                    else np.sqrt(np.sum(delta ** 2, -1)))
            self.assertTrue(np.all(size <= bound * (1 + 1e-5)), size)
            self.assertTrue(np.all(size > 0.5 * bound), size)
            self.assertTrue(adversarial.min() >= 0)
            self.assertTrue(adversarial.max() <= 255)

    def test_zero_epsilon_gives_the_clean_images_and_accuracy(self):
        model, _ = _capsules()
        for method in attacks.METHODS:
            adversarial = attacks.adversarial_images(
                model, IMAGES, LABELS, epsilon=0.0, method=method,
                steps=3, restarts=2)
            np.testing.assert_array_equal(adversarial, IMAGES)
            self.assertEqual(
                attacks.attack_accuracy(model, IMAGES, LABELS, epsilon=0.0,
                                        method=method, steps=3),
                _accuracy(model, IMAGES, LABELS))

    def test_pgd_reaches_the_linear_score_margin_maximum(self):
        model, kernel, bias = _linear()
        images = np.clip(IMAGES, 40, 215)  # every pixel can move 25.5
        adversarial = attacks.adversarial_images(
            model, images, LABELS, epsilon=0.1, loss="score_margin",
            steps=3)
        # The maximum of s_j - s_t over the L-inf ball for a fixed rival
        # j is reached at the sign step: 25.5 |W_j - W_t|_1 above clean.
        scores = images.reshape(4, -1) @ kernel + bias
        rivals = np.argsort(scores - np.eye(3)[LABELS] * 1e9, -1)
        clean = (scores[np.arange(4), rivals[:, -1]]
                 - scores[np.arange(4), LABELS])
        bound = clean + 25.5 * np.abs(
            kernel[:, rivals[:, -1]] - kernel[:, LABELS]).sum(0)
        loss, _ = attacks.attack_gradients(model, adversarial, LABELS,
                                           loss="score_margin")
        self.assertTrue(np.all(loss > clean))
        self.assertAllClose(loss, bound, atol=1e-3, rtol=1e-4)


class VoteAttackTest(TestCase):
    def test_vote_gradient_against_numpy_finite_differences(self):
        images = IMAGES.astype("float64")
        for router_name in ("dynamic", "fccaps"):
            with self.subTest(router=router_name):
                model, weights = _capsules(router_name)
                losses, gradients = attacks.attack_gradients(
                    model, IMAGES, LABELS, target="votes")
                reference = models.finite_difference(
                    lambda x, w=weights, r=router_name: models.
                    numpy_vote_loss(x, LABELS, w, r), images)
                self.assertAllClose(
                    losses, models.numpy_vote_loss(images, LABELS, weights,
                                                   router_name),
                    atol=1e-5, rtol=1e-4)
                scale = np.abs(reference).max()
                self.assertGreater(scale, 1e-6)
                self.assertAllClose(gradients / scale, reference / scale,
                                    atol=2e-3, rtol=0)
        # The output attack differentiates through routing: another
        # gradient.
        _, output_gradients = attacks.attack_gradients(model, IMAGES,
                                                       LABELS)
        self.assertFalse(np.allclose(output_gradients / scale,
                                     reference / scale, atol=2e-2))

    def test_vote_attack_raises_the_vote_loss(self):
        model, weights = _capsules()
        images = np.clip(IMAGES, 60, 195)
        adversarial = attacks.adversarial_images(
            model, images, LABELS, epsilon=0.2, steps=3, target="votes")
        before = models.numpy_vote_loss(images, LABELS, weights, "dynamic")
        after = models.numpy_vote_loss(adversarial, LABELS, weights,
                                       "dynamic")
        self.assertTrue(np.all(after > before), (before, after))


class DeterminismTest(TestCase):
    def test_same_seed_same_images_and_batch_size_does_not_matter(self):
        model, _ = _capsules()
        arguments = {"epsilon": 0.03, "steps": 3, "norm": "l2"}
        first = attacks.adversarial_images(model, IMAGES, LABELS, seed=3,
                                           **arguments)
        again = attacks.adversarial_images(model, IMAGES, LABELS, seed=3,
                                           **arguments)
        np.testing.assert_array_equal(first, again)
        batched = attacks.adversarial_images(model, IMAGES, LABELS, seed=3,
                                             batch_size=2, **arguments)
        self.assertAllClose(batched, first, atol=1e-3, rtol=0)
        other = attacks.adversarial_images(model, IMAGES, LABELS, seed=4,
                                           **arguments)
        self.assertGreater(np.abs(other - first).max(), 1.0)

    def test_restarts_keep_the_run_that_fools_else_the_highest_loss(self):
        model, _ = _capsules()
        arguments = {"epsilon": 0.15, "method": "pgd", "norm": "linf",
                     "steps": 3, "step_size": 0.02, "random_start": True,
                     "restarts": 3, "loss": "margin", "seed": 1,
                     "batch_size": 256, "target": "output"}
        settings = attacks._check_arguments(model, IMAGES, LABELS,
                                            arguments)
        attack = attacks._attack_functions(model, settings)
        radius = np.float32(0.15 * 255)
        runs = [attacks._run(
            attack, IMAGES, LABELS, settings, radius=radius,
            alpha=np.float32(0.02 * 255), steps=3,
            starts=[attacks._random_start(IMAGES.shape, radius, settings,
                                          restart)])
            for restart in range(3)]
        del arguments["batch_size"]
        combined = attacks.adversarial_images(model, IMAGES, LABELS,
                                              **arguments)
        losses = [attacks.attack_gradients(model, run, LABELS)[0]
                  for run in runs]
        fooled = [np.argmax(attacks._to_numpy(model(run)), -1)
                  != LABELS for run in runs]
        for image in range(4):
            chosen = next((r for r in range(3) if fooled[r][image]), None)
            if chosen is None:
                chosen = int(np.argmax([loss[image] for loss in losses]))
            self.assertAllClose(combined[image], runs[chosen][image],
                                atol=1e-4, rtol=0)
        # The runs differ, so the choice matters.
        self.assertGreater(np.abs(runs[0] - runs[1]).max(), 1.0)


@pytest.mark.single_backend
def test_random_starts_are_uniform_in_the_ball():
    settings = {"seed": 0, "norm": "linf"}
    shape = (4000, 2, 2, 4)  # 16 pixels per image
    linf = attacks._random_start(shape, np.float32(10.0), settings, 0)
    assert np.abs(linf).max() <= 10.0
    # Uniform on [-10, 10]: a quarter of the pixels beyond +-7.5.
    assert abs(np.mean(np.abs(linf) > 7.5) - 0.25) < 0.01
    settings["norm"] = "l2"
    l2 = attacks._random_start(shape, np.float32(10.0), settings, 0)
    norms = np.sqrt(np.sum(l2.astype("float64") ** 2, axis=(1, 2, 3)))
    assert norms.max() <= 10.0 * (1 + 1e-6)
    # Uniform in the 16-dimensional ball: P(norm <= r R) = r^16.
    for fraction in (0.9, 0.95, 0.99):
        assert abs(np.mean(norms <= 10.0 * fraction)
                   - fraction ** 16) < 0.03, fraction
    # Uniform directions: the mean direction is near 0.
    directions = l2.reshape(len(l2), -1) / norms[:, None]
    assert np.abs(directions.mean(0)).max() < 0.05
    # Another restart draws other starts.
    other = attacks._random_start(shape, np.float32(10.0), settings, 1)
    assert np.abs(other - l2).max() > 1.0


class CacheTest(TestCase):
    def test_traced_steps_are_reused_and_do_not_keep_the_model(self):
        model, _, _ = models.linear_model(np.random.default_rng(2))
        attacks.adversarial_images(model, IMAGES, LABELS, epsilon=0.1,
                                   steps=2)
        functions = attacks._CACHE[model][
            ("linf", "margin", "output", keras.backend.backend())]
        attacks.adversarial_images(model, IMAGES, LABELS, epsilon=0.2,
                                   steps=4)
        self.assertEqual(len(attacks._CACHE[model]), 1)
        attacks.attack_accuracy(model, IMAGES, LABELS, epsilon=0.1)
        self.assertEqual(sorted(map(str, attacks._CACHE[model])),
                         ["('linf', 'margin', 'output', "
                          f"'{keras.backend.backend()}')", "scores"])
        self.assertIs(attacks._CACHE[model][
            ("linf", "margin", "output", keras.backend.backend())],
            functions)
        reference = weakref.ref(model)
        del model, functions
        gc.collect()
        self.assertIsNone(reference())


@pytest.mark.single_backend
class BadInputTest(TestCase):
    def _refuses(self, error, pattern, model=None, **arguments):
        model = model or _linear()[0]
        arguments = {"epsilon": 0.1, **arguments}
        with self.assertRaisesRegex(error, pattern):
            attacks.adversarial_images(model, IMAGES, LABELS, **arguments)

    def test_bad_numbers(self):
        for value in (-0.1, 1.5, float("nan")):
            self._refuses(ValueError, r"`epsilon`.*\[0, 1\].*epsilon=",
                          epsilon=value)
        self._refuses(TypeError, "`epsilon`", epsilon="0.1")
        self._refuses(ValueError, "`steps`.*>= 1.*steps=0", steps=0)
        self._refuses(ValueError, "`restarts`.*restarts=0", restarts=0)
        self._refuses(ValueError, "`step_size`.*step_size=0", step_size=0)
        self._refuses(ValueError, "`batch_size`.*batch_size=0",
                      batch_size=0)
        self._refuses(ValueError, "`seed`.*seed=-1", seed=-1)
        self._refuses(TypeError, "`random_start`.*bool", random_start=1)

    def test_unknown_choices(self):
        for name, value in (("method", "bim"), ("norm", "l1"),
                            ("loss", "hinge"), ("target", "routes")):
            self._refuses(ValueError, f"`{name}`.*{value}", **{name: value})

    def test_data(self):
        model = _linear()[0]
        with self.assertRaisesRegex(ValueError, r"`images`.*\(n, height"):
            attacks.adversarial_images(model, IMAGES[0], LABELS,
                                       epsilon=0.1)
        with self.assertRaisesRegex(ValueError,
                                    r"`images`.*\[0, 255\].*-1"):
            attacks.adversarial_images(model, IMAGES - 1 - IMAGES.min(),
                                       LABELS, epsilon=0.1)
        with self.assertRaisesRegex(ValueError, "`labels`.*shape"):
            attacks.adversarial_images(model, IMAGES, LABELS[:2],
                                       epsilon=0.1)
        with self.assertRaisesRegex(ValueError, r"`labels`.*\[0, 3\)"):
            attacks.adversarial_images(model, IMAGES, LABELS + 1,
                                       epsilon=0.1)

    def test_models_without_differentiable_scores(self):
        class Exported:  # What an exported SavedModel reader looks like.
            def __call__(self, images):
                return {"length": np.zeros((len(images), 3))}

        for predictor in (Exported(), lambda images: images):
            with self.assertRaisesRegex(TypeError, "`predictor`.*SavedModel"):
                attacks.adversarial_images(predictor, IMAGES, LABELS,
                                           epsilon=0.1)
        inputs = keras.Input((4, 4, 1))
        two_outputs = keras.Model(inputs, [keras.layers.Flatten()(inputs)] * 2)
        self._refuses(ValueError, "`predictor`.*one class-score output",
                      model=two_outputs)

    def test_scores_without_a_gradient(self):
        if keras.backend.backend() == "jax":
            pytest.skip("jax.grad gives zeros, not None, through "
                        "stop_gradient")
        inputs = keras.Input((4, 4, 1))
        scores = keras.layers.Dense(3)(keras.layers.Flatten()(
            keras.layers.Lambda(keras.ops.stop_gradient)(inputs)))
        self._refuses(ValueError, "`predictor`.*no gradient",
                      model=keras.Model(inputs, scores))

    def test_vote_attack_needs_a_router_with_votes(self):
        self._refuses(ValueError, "target='votes'.*no router.*a CNN",
                      target="votes")
        for model, name in ((models.vector_routing_model(), "VectorRouting"),
                            (models.em_routing_model(), "EMRouting")):
            self._refuses(ValueError,
                          f"target='votes'.*squashed sums.*{name}",
                          model=model, target="votes")


_CROSS_BACKEND_SCRIPT = """
import sys
import numpy as np
from keras_caps.evaluation import attacks
from tests.evaluation import attack_models as models
images = np.load(sys.argv[1])
labels = np.array([0, 1, 2, 0])
model, _ = models.capsule_model("dynamic")
np.save(sys.argv[2], attacks.adversarial_images(
    model, images, labels, epsilon=0.05, norm="l2", steps=3, seed=5,
    target="votes"))
"""


def _attack_on(backend, directory):
    images = os.path.join(directory, "images.npy")
    np.save(images, IMAGES)
    output = os.path.join(directory, f"{backend}.npy")
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": REPO_ROOT,
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", _CROSS_BACKEND_SCRIPT, images, output],
        capture_output=True, text=True, env=env, check=False, cwd=REPO_ROOT)
    if result.returncode:
        raise AssertionError(f"{backend} attack failed:\n{result.stderr}")
    return np.load(output)


@pytest.mark.single_backend
def test_tensorflow_and_jax_give_the_same_vote_attack(tmp_path):
    # PGD-3 (L2, from a seeded random start) through three iterations of
    # dynamic routing: the same weights, the same images.
    jax = _attack_on("jax", str(tmp_path))
    if keras.backend.backend() == "tensorflow":
        model, _ = _capsules()
        tensorflow = attacks.adversarial_images(
            model, IMAGES, LABELS, epsilon=0.05, norm="l2", steps=3, seed=5,
            target="votes")
    else:
        tensorflow = _attack_on("tensorflow", str(tmp_path))
    assert np.abs(tensorflow - IMAGES).max() > 1.0
    np.testing.assert_allclose(jax, tensorflow, atol=1e-2)
