import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.applications import MODELS
from keras_caps.applications import MatrixCapsNet
from keras_caps.applications.matrix_capsnet import MATRIX_CAPSNET
from keras_caps.applications.matrix_capsnet import recipe_callbacks
from keras_caps.callbacks import SpreadLossMarginSchedule
from keras_caps.losses import SpreadLoss
from keras_caps.testing import TestCase

# Trainable parameters from the layer shapes (Hinton et al. 2018, §5),
# 1-channel images, n classes:
#   conv 5x5: 25 A + A; primary: A * B * 17 + B * 17;
#   ConvCaps 3x3: 9 * in * out * 16 + 2 out (beta_u, beta_a);
#   class capsules: D * n * 16 + 2 n.
# smallNORB, A = B = C = D = 32, n = 5:
#   832 + 17,952 + 147,520 + 147,520 + 2,570 = 316,394 (paper: "310K").
# MNIST, the paper's small network A = 64, B = 8, C = D = 16, n = 10:
#   1,664 + 8,840 + 18,464 + 36,896 + 2,580 = 68,444.
# Non-trainable: one routing temperature per capsule layer (3).
PARAMETER_COUNTS = {"smallnorb": 316_394, "mnist": 68_444}
NON_TRAINABLE_COUNTS = {"smallnorb": 3, "mnist": 3}
# The smallest input: 17 -> 7 (conv) -> 3 (ConvCaps1) -> 1 (ConvCaps2).
# One EM iteration: the same layers at a third of the routing work.
SMALL = {"input_shape": (17, 17, 1), "num_iterations": 1,
         "jit_compile": False}


def _num_values(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def _batch(input_shape=(17, 17, 1), num_classes=10, batch_size=2):
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size,) + tuple(input_shape))
    labels = np.eye(num_classes)[rng.integers(0, num_classes, batch_size)]
    return images.astype("float32"), labels.astype("float32")


class MatrixCapsNetTest(TestCase):
    @parameterized.named_parameters(
        (dataset, dataset) for dataset in PARAMETER_COUNTS)
    @pytest.mark.single_backend
    def test_parameter_counts_and_grids(self, dataset):
        model = MatrixCapsNet(dataset, compile=False)
        self.assertEqual(_num_values(model.trainable_weights),
                         PARAMETER_COUNTS[dataset])
        self.assertEqual(_num_values(model.non_trainable_weights),
                         NON_TRAINABLE_COUNTS[dataset])
        grids = [model.get_layer(name).output.shape[1:3]
                 for name in ("primary_caps", "conv_caps_1", "conv_caps_2")]
        expected = {"smallnorb": [(14, 14), (6, 6), (4, 4)],
                    "mnist": [(12, 12), (5, 5), (3, 3)]}[dataset]
        self.assertEqual([tuple(grid) for grid in grids], expected)
        self.assertEqual(model.output_shape,
                         (None, {"smallnorb": 5, "mnist": 10}[dataset]))

    def test_one_training_step_trains_and_predicts(self):
        model = MatrixCapsNet("mnist", **SMALL)
        self.assertIsInstance(model.loss, SpreadLoss)
        self.assertAllClose(model.loss.margin, 0.2)
        self.assertIsInstance(model.optimizer, keras.optimizers.Adam)
        images, labels = _batch()
        before = [np.array(w) for w in model.trainable_weights]
        # Eagerly: tracing the EM routing's training graph takes minutes
        # on a busy 2-core machine.
        model.run_eagerly = True
        history = model.fit(images, labels, batch_size=2, epochs=1,
                            verbose=0)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("accuracy", history.history)
        changed = [not np.allclose(b, np.array(w))
                   for b, w in zip(before, model.trainable_weights)]
        self.assertTrue(all(changed))  # every layer got a gradient
        scores = model.predict(images, verbose=0)
        self.assertEqual(scores.shape, (2, 10))
        self.assertTrue(np.all((scores >= 0) & (scores <= 1.0 + 1e-3)))

    def test_keras_round_trip(self):
        model = MatrixCapsNet("mnist", num_classes=3, **SMALL)
        images, _ = _batch()
        restored = self.run_model_saving_test(model, images, atol=1e-5,
                                              rtol=1e-5)
        self.assertIsInstance(restored.loss, SpreadLoss)

    @pytest.mark.single_backend
    def test_each_image_is_standardised(self):
        model = MatrixCapsNet("smallnorb", compile=False)
        images = np.random.default_rng(1).uniform(
            0, 255, (2, 32, 32, 1)).astype("float32")
        images[1] = 3.0 * images[0] + 40.0  # another brightness, contrast
        scaled = np.array(model.get_layer("input_scaling")(images))
        self.assertAllClose(scaled.mean(axis=(1, 2, 3)), [0.0, 0.0],
                            atol=1e-4)
        self.assertAllClose(scaled.std(axis=(1, 2, 3)), [1.0, 1.0],
                            atol=1e-4)
        self.assertAllClose(scaled[0], scaled[1], atol=1e-4)

    @pytest.mark.single_backend
    def test_routing_settings(self):
        def settings(dataset):
            model = MatrixCapsNet(dataset, compile=False)
            caps = [model.get_layer(name) for name in (
                "conv_caps_1", "conv_caps_2", "digit_caps")]
            return ([layer.kernel_initializer.stddev for layer in caps],
                    [layer.inverse_temperatures[-1] for layer in caps],
                    [layer.num_iterations for layer in caps])

        self.assertEqual(settings("smallnorb"),
                         ([0.5] * 3, [0.01] * 3, [3] * 3))
        self.assertEqual(settings("mnist"),
                         ([0.5] * 3, [0.01] * 3, [2] * 3))

    @pytest.mark.single_backend
    def test_recipe_and_schedule(self):
        self.assertIs(MODELS["matrix_capsnet"].family, MATRIX_CAPSNET)
        self.assertFalse(MATRIX_CAPSNET.has_decoder)
        (schedule,) = recipe_callbacks("smallnorb", 30)
        self.assertIsInstance(schedule, SpreadLossMarginSchedule)
        self.assertEqual(schedule.get_config(), {
            "initial_margin": 0.2, "final_margin": 0.9, "ramp_epochs": 30})
        self.assertEqual(MATRIX_CAPSNET.dataset_options("smallnorb"),
                         {"preset": "matrix_capsules"})

    @parameterized.named_parameters(
        ("too_small", {"input_shape": (16, 16, 1)}, "at least 17"),
        ("decoder", {"reconstruction": True}, "no decoder"),
        ("dataset", {"dataset": "cifar10"}, "Unknown `dataset`"),
        ("iterations", {"num_iterations": 0}, "num_iterations"))
    @pytest.mark.single_backend
    def test_bad_arguments(self, kwargs, message):
        with self.assertRaisesRegex(ValueError, message):
            MatrixCapsNet(**kwargs)
