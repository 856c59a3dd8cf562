import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.metrics import ExactMatchAccuracy
from keras_caps.metrics import MultiDigitAccuracy
from keras_caps.metrics import multi_digit_accuracy
from keras_caps.testing import TestCase
from tests.metrics import reference


class MultiDigitAccuracyTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.y_true = reference.random_multi_hot(rng, 64)
        self.y_pred = reference.noisy_scores(rng, self.y_true)

    def test_matches_numpy_reference(self):
        expected = reference.top_k_matches(self.y_true, self.y_pred) / 2
        self.assertEqual(set(expected.tolist()), {0.0, 0.5, 1.0})
        self.assertAllClose(multi_digit_accuracy(self.y_true, self.y_pred),
                            expected)
        metric = MultiDigitAccuracy()
        metric.update_state(self.y_true, self.y_pred)
        self.assertAllClose(metric.result(), expected.mean())

    def test_matches_official_multi_accuracy(self):
        metric = MultiDigitAccuracy()
        metric.update_state(self.y_true, self.y_pred)
        self.assertAllClose(
            metric.result(),
            reference.official_multi_accuracy(self.y_true, self.y_pred),
            atol=1e-6)

    def test_accumulates_and_weights(self):
        metric = MultiDigitAccuracy()
        for start in range(0, 64, 16):
            metric.update_state(self.y_true[start:start + 16],
                                self.y_pred[start:start + 16])
        expected = reference.top_k_matches(self.y_true, self.y_pred) / 2
        self.assertAllClose(metric.result(), expected.mean())
        weights = np.linspace(0.0, 1.0, 64).astype("float32")
        metric.reset_state()
        metric.update_state(self.y_true, self.y_pred, sample_weight=weights)
        self.assertAllClose(metric.result(),
                            np.sum(expected * weights) / np.sum(weights),
                            atol=1e-6)

    def test_hand_computed(self):
        # Truth {0, 1}; top 2 predicted {0, 2}: one of two digits found.
        self.assertAllClose(
            multi_digit_accuracy([[1.0, 1.0, 0.0]], [[0.9, 0.1, 0.8]]),
            [0.5])

    @parameterized.named_parameters(("one", 1), ("three", 3))
    def test_num_digits(self, num_digits):
        rng = np.random.default_rng(1)
        y_true = reference.random_multi_hot(rng, 32, k=num_digits)
        y_pred = rng.uniform(size=(32, 10)).astype("float32")
        expected = reference.top_k_matches(y_true, y_pred,
                                           k=num_digits) / num_digits
        metric = MultiDigitAccuracy(num_digits=num_digits)
        metric.update_state(y_true, y_pred)
        self.assertAllClose(metric.result(), expected.mean(), atol=1e-6)

    def test_serialization(self):
        revived = self.run_serialization_test(
            MultiDigitAccuracy(num_digits=3, name="per_digit"))
        self.assertEqual(revived.num_digits, 3)
        self.assertEqual(revived.name, "per_digit")

    def test_invalid_num_digits(self):
        with self.assertRaisesRegex(ValueError, "num_digits"):
            MultiDigitAccuracy(num_digits=0)
        with self.assertRaisesRegex(TypeError, "num_digits"):
            MultiDigitAccuracy(num_digits=1.5)

    def test_in_compiled_model(self):
        inputs = keras.Input((10,))
        outputs = keras.layers.Dense(10, activation="sigmoid")(inputs)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss="mse",
                      metrics=[MultiDigitAccuracy()])
        logs = model.evaluate(self.y_pred, self.y_true, batch_size=16,
                              verbose=0, return_dict=True)
        self.assertIn("multi_digit_accuracy", logs)
        self.assertBetween(logs["multi_digit_accuracy"], 0.0, 1.0)


class DigitAccuracyDirectionTest(TestCase):
    """Both multi-digit metrics are maximised by Keras' `mode="auto"`."""

    @parameterized.named_parameters(
        ("multi_digit", MultiDigitAccuracy),
        ("exact_match", ExactMatchAccuracy),
    )
    def test_callbacks_in_auto_mode_maximise(self, metric_cls):
        rng = np.random.default_rng(4)
        y_true = reference.random_multi_hot(rng, 8)
        x = rng.normal(size=(8, 5)).astype("float32")
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(10)])
        metric = metric_cls()
        model.compile(optimizer="sgd", loss="mse", metrics=[metric])
        callbacks = [
            keras.callbacks.EarlyStopping(monitor=metric.name, mode="auto"),
            keras.callbacks.ReduceLROnPlateau(monitor=metric.name,
                                              mode="auto"),
        ]
        model.fit(x, y_true, epochs=1, verbose=0, callbacks=callbacks)
        for callback in callbacks:
            self.assertIs(callback.monitor_op, keras.ops.greater)
        # The score per image is still the multi-digit one, not
        # `keras.metrics.Accuracy`'s elementwise equality.
        result = model.evaluate(x, y_true, verbose=0, return_dict=True)
        expected = metric_cls.score_fn(y_true, model.predict(x, verbose=0))
        self.assertAllClose(result[metric.name],
                            np.mean(keras.ops.convert_to_numpy(expected)),
                            atol=1e-6)
