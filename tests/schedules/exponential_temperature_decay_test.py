import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.schedules import ExponentialTemperatureDecay
from keras_caps.testing import TestCase


class ExponentialTemperatureDecayTest(TestCase):
    def test_values(self):
        # tau_t = max(tau_min, tau_0 exp(-lambda t)), the tutorial's
        # tau_0 = 10, lambda = 0.01 with a floor of 1.
        schedule = ExponentialTemperatureDecay(10.0, 0.01, 1.0)
        steps = np.array([0, 1, 50, 229, 231, 1000, 10**6])
        expected = np.maximum(1.0, 10.0 * np.exp(-0.01 * steps))
        self.assertAllClose([schedule(int(step)) for step in steps],
                            expected, rtol=1e-12)
        self.assertGreater(schedule(229), 1.0)  # 10 e^-2.29 = 1.013
        self.assertEqual(schedule(231), 1.0)  # the floor
        constant = ExponentialTemperatureDecay(2.0, 0.0, 0.5)
        self.assertEqual(constant(10**9), 2.0)

    def test_serialization(self):
        schedule = ExponentialTemperatureDecay(5.0, 0.1, 0.5)
        config = keras.saving.serialize_keras_object(schedule)
        self.assertEqual(config["config"],
                         {"initial_temperature": 5.0, "decay_rate": 0.1,
                          "minimum_temperature": 0.5})
        restored = keras.saving.deserialize_keras_object(config)
        self.assertIsInstance(restored, ExponentialTemperatureDecay)
        self.assertEqual(restored(7), schedule(7))

    @parameterized.named_parameters(
        ("zero_initial", {"initial_temperature": 0.0}, ValueError,
         "initial_temperature"),
        ("inf_initial", {"initial_temperature": float("inf")}, ValueError,
         "initial_temperature"),
        ("string_initial", {"initial_temperature": "10"}, TypeError,
         "initial_temperature"),
        ("negative_rate", {"decay_rate": -0.1}, ValueError, "decay_rate"),
        ("nan_rate", {"decay_rate": float("nan")}, ValueError,
         "decay_rate"),
        ("bool_rate", {"decay_rate": True}, TypeError, "decay_rate"),
        ("zero_floor", {"minimum_temperature": 0.0}, ValueError,
         "minimum_temperature"),
        ("floor_above_initial", {"minimum_temperature": 20.0}, ValueError,
         "minimum_temperature"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"initial_temperature": 10.0, "decay_rate": 0.01,
                  "minimum_temperature": 1.0, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            ExponentialTemperatureDecay(**kwargs)


class ScheduleRegistrationTest(TestCase):
    def test_registered_name(self):
        self.assertEqual(
            keras.saving.get_registered_name(ExponentialTemperatureDecay),
            "keras_caps>ExponentialTemperatureDecay")
