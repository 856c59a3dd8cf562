import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.losses import SpreadLoss
from keras_caps.losses import spread_loss
from keras_caps.testing import TestCase


def numpy_spread_loss(labels, activations, margin):
    """Hinton, Sabour & Frosst 2018, §3.1, with loops over the classes."""
    losses = np.zeros(len(labels))
    for b, target in enumerate(labels):
        for i in range(activations.shape[1]):
            if i != target:
                gap = activations[b, target] - activations[b, i]
                losses[b] += max(0.0, margin - gap) ** 2
    return losses


class _TraceCounter(keras.layers.Layer):
    """Identity that counts how often its `call` runs (or is traced)."""

    traces = 0

    def call(self, inputs):
        type(self).traces += 1
        return inputs


def _identity_model(loss, num_classes):
    """Scores = inputs, through a counted identity; SGD of rate 0."""
    inputs = keras.Input((num_classes,))
    scores = keras.layers.Dense(
        num_classes, kernel_initializer="identity", use_bias=False)(inputs)
    model = keras.Model(inputs, _TraceCounter()(scores))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
    return model


class SpreadLossTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.activations = rng.uniform(size=(4, 5)).astype("float32")
        self.labels = np.array([0, 3, 4, 1])
        self.one_hot = np.eye(5, dtype="float32")[self.labels]

    @parameterized.named_parameters(("start", 0.2), ("middle", 0.55),
                                    ("end", 0.9))
    def test_matches_numpy_reference(self, margin):
        expected = numpy_spread_loss(self.labels, self.activations, margin)
        for targets in (self.one_hot, self.labels, self.labels[:, None]):
            self.assertAllClose(
                spread_loss(targets, self.activations, margin=margin),
                expected, rtol=1e-5)
        self.assertAllClose(
            SpreadLoss(margin)(self.labels, self.activations),
            expected.mean(), rtol=1e-5)

    def test_hand_computed_value(self):
        # Target 1 (0.6): class 0 at gap 0.1 costs (0.2 - 0.1)^2, class 2
        # at gap 0.5 costs nothing at margin 0.2 and (0.9 - 0.5)^2 at 0.9.
        scores = np.array([[0.5, 0.6, 0.1]])
        self.assertAllClose(spread_loss([1], scores, margin=0.2), [0.01],
                            atol=1e-7)
        self.assertAllClose(spread_loss([1], scores, margin=0.9),
                            [0.64 + 0.16], atol=1e-6)

    def test_loss(self):
        self.run_loss_test(SpreadLoss(margin=0.4), self.one_hot,
                           self.activations)

    def test_config_keeps_the_current_margin(self):
        loss = SpreadLoss()
        loss.margin = 0.7
        restored = SpreadLoss.from_config(loss.get_config())
        self.assertAllClose(restored.margin, 0.7)

    def test_margin_changes_without_retracing(self):
        if keras.backend.backend() == "jax":
            pytest.skip("A compiled JAX step holds the margin as a "
                        "constant; SpreadLossMarginSchedule rebuilds it "
                        "(tests/callbacks/spread_loss_margin_schedule_test)")
        loss = SpreadLoss(margin=0.2)
        model = _identity_model(loss, 5)
        _TraceCounter.traces = 0
        for margin in (0.2, 0.9, 0.5):
            loss.margin = margin
            value = model.train_on_batch(self.activations, self.labels)
            self.assertAllClose(
                value, numpy_spread_loss(self.labels, self.activations,
                                         margin).mean(), rtol=1e-5)
        if keras.backend.backend() == "tensorflow":
            # One trace for the three margins (PyTorch runs eagerly).
            self.assertEqual(_TraceCounter.traces, 1)

    def test_mixed_precision_scores(self):
        for dtype in ("float16", "bfloat16"):
            scores = keras.ops.cast(self.activations, dtype)
            value = SpreadLoss(0.9)(self.labels, scores)
            self.assertEqual(keras.backend.standardize_dtype(value.dtype),
                             "float32")
            self.assertAllClose(
                value, numpy_spread_loss(self.labels, self.activations,
                                         0.9).mean(), rtol=2e-2)

    @pytest.mark.single_backend
    def test_bad_labels_raise(self):
        with self.assertRaisesRegex(ValueError, "y_true=5 at index 1"):
            spread_loss(np.array([0, 5, 1, 1]), self.activations)
        with self.assertRaisesRegex(ValueError, "y_true=1.5 at index 0"):
            spread_loss(np.array([1.5, 0, 1, 1]), self.activations)
        with self.assertRaisesRegex(ValueError, "y_true.shape"):
            spread_loss(np.zeros((4, 3)), self.activations)
        with self.assertRaisesRegex(ValueError, "y_pred.shape"):
            spread_loss(self.labels, np.zeros(4))

    @pytest.mark.single_backend
    def test_bad_margin_raises(self):
        with self.assertRaisesRegex(ValueError, "margin"):
            SpreadLoss(margin=-0.1)
        loss = SpreadLoss()
        with self.assertRaisesRegex(ValueError, "margin"):
            loss.margin = float("nan")
