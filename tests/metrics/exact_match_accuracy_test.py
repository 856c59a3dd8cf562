import keras
import numpy as np

from keras_caps.metrics import ExactMatchAccuracy
from keras_caps.metrics import MultiDigitAccuracy
from keras_caps.metrics import exact_match_accuracy
from keras_caps.testing import TestCase
from tests.metrics import reference


class ExactMatchAccuracyTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.y_true = reference.random_multi_hot(rng, 64)
        self.y_pred = reference.noisy_scores(rng, self.y_true)

    def test_matches_numpy_reference(self):
        expected = (reference.top_k_matches(self.y_true, self.y_pred)
                    == 2).astype("float32")
        self.assertEqual(set(expected.tolist()), {0.0, 1.0})
        self.assertAllClose(exact_match_accuracy(self.y_true, self.y_pred),
                            expected)
        metric = ExactMatchAccuracy()
        metric.update_state(self.y_true, self.y_pred)
        self.assertAllClose(metric.result(), expected.mean())

    def test_never_above_per_digit_accuracy(self):
        exact, per_digit = ExactMatchAccuracy(), MultiDigitAccuracy()
        exact.update_state(self.y_true, self.y_pred)
        per_digit.update_state(self.y_true, self.y_pred)
        self.assertLess(float(exact.result()), float(per_digit.result()))

    def test_hand_computed(self):
        self.assertAllClose(
            exact_match_accuracy([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]],
                                 [[0.9, 0.8, 0.1], [0.9, 0.1, 0.8]]),
            [1.0, 0.0])

    def test_sample_weight(self):
        expected = (reference.top_k_matches(self.y_true, self.y_pred)
                    == 2).astype("float32")
        weights = np.linspace(0.0, 1.0, 64).astype("float32")
        metric = ExactMatchAccuracy()
        metric.update_state(self.y_true, self.y_pred, sample_weight=weights)
        self.assertAllClose(metric.result(),
                            np.sum(expected * weights) / np.sum(weights),
                            atol=1e-6)

    def test_serialization(self):
        revived = self.run_serialization_test(
            ExactMatchAccuracy(num_digits=3, name="exact"))
        self.assertEqual(revived.num_digits, 3)

    def test_invalid_num_digits(self):
        with self.assertRaisesRegex(ValueError, "num_digits"):
            ExactMatchAccuracy(num_digits=-1)

    def test_registered(self):
        self.assertEqual(keras.saving.get_registered_name(ExactMatchAccuracy),
                         "keras_caps>ExactMatchAccuracy")
        self.assertEqual(ExactMatchAccuracy._keras_caps_api_path,
                         "keras_caps.metrics.ExactMatchAccuracy")
