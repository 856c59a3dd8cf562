import keras
import numpy as np
import pytest

from keras_caps.callbacks import SpreadLossMarginSchedule
from keras_caps.losses import SpreadLoss
from keras_caps.testing import TestCase
from tests.losses.spread_loss_test import numpy_spread_loss


def _model(loss):
    """Scores = inputs (identity kernel); SGD of rate 0 keeps them."""
    inputs = keras.Input((3,))
    scores = keras.layers.Dense(3, kernel_initializer="identity",
                                use_bias=False)(inputs)
    model = keras.Model(inputs, scores)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
    return model


class SpreadLossMarginScheduleTest(TestCase):
    def setUp(self):
        super().setUp()
        self.scores = np.array([[0.5, 0.6, 0.1], [0.2, 0.1, 0.4]],
                               dtype="float32")
        self.labels = np.array([1, 2])

    def test_linear_margins_and_the_losses_trained_with_them(self):
        # The loss of each epoch is the NumPy spread loss at that epoch's
        # margin: the compiled step read the new margin (JAX: rebuilt).
        model = _model(SpreadLoss())
        history = model.fit(self.scores, self.labels, epochs=4, verbose=0,
                            callbacks=[SpreadLossMarginSchedule()])
        margins = history.history["spread_loss_margin"]
        self.assertAllClose(margins, [0.2, 0.2 + 0.7 / 3, 0.2 + 1.4 / 3,
                                      0.9], atol=1e-9)
        expected = [numpy_spread_loss(self.labels, self.scores, m).mean()
                    for m in margins]
        self.assertAllClose(history.history["loss"], expected, rtol=1e-5)
        self.assertAllClose(model.loss.margin, 0.9)

    @pytest.mark.single_backend
    def test_ramp_epochs_and_resumed_runs(self):
        loss = SpreadLoss()
        model = _model(loss)
        schedule = SpreadLossMarginSchedule(0.3, 0.5, ramp_epochs=3)
        history = model.fit(self.scores, self.labels, epochs=5,
                            initial_epoch=1, verbose=0,
                            callbacks=[schedule])
        self.assertAllClose(history.history["spread_loss_margin"],
                            [0.4, 0.5, 0.5, 0.5], atol=1e-9)
        self.assertAllClose(schedule.margin(0, 3), 0.3)

    @pytest.mark.single_backend
    def test_losses_in_a_dict(self):
        inputs = keras.Input((3,))
        model = keras.Model(inputs, {"scores": keras.layers.Dense(
            3, name="scores")(inputs)})
        loss = SpreadLoss()
        model.compile(optimizer=keras.optimizers.SGD(0.0),
                      loss={"scores": loss})
        model.fit(self.scores, {"scores": self.labels}, epochs=2, verbose=0,
                  callbacks=[SpreadLossMarginSchedule()])
        self.assertAllClose(loss.margin, 0.9)

    @pytest.mark.single_backend
    def test_bad_arguments_and_models(self):
        with self.assertRaisesRegex(ValueError, "final_margin"):
            SpreadLossMarginSchedule(0.5, 0.4)
        with self.assertRaisesRegex(ValueError, "ramp_epochs"):
            SpreadLossMarginSchedule(ramp_epochs=0)
        model = _model("mse")
        with self.assertRaisesRegex(ValueError, "SpreadLoss"):
            model.fit(self.scores, self.scores, epochs=1, verbose=0,
                      callbacks=[SpreadLossMarginSchedule()])

    @pytest.mark.single_backend
    def test_config_round_trip(self):
        schedule = SpreadLossMarginSchedule(0.1, 0.8, ramp_epochs=7)
        restored = SpreadLossMarginSchedule(**schedule.get_config())
        self.assertEqual(restored.get_config(), schedule.get_config())
