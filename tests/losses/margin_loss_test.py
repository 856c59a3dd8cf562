import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.losses import MarginLoss
from keras_caps.losses import margin_loss
from keras_caps.testing import TestCase


def numpy_margin_loss(targets, lengths, m_plus=0.9, m_minus=0.1, lam=0.5):
    """Sabour et al. 2017, Eq. 4, with loops over examples and classes."""
    losses = np.zeros(len(targets))
    for b in range(len(targets)):
        for k in range(targets.shape[1]):
            t, v = targets[b, k], lengths[b, k]
            losses[b] += t * max(0.0, m_plus - v) ** 2
            losses[b] += lam * (1 - t) * max(0.0, v - m_minus) ** 2
    return losses


class MarginLossTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.lengths = rng.uniform(size=(6, 5)).astype("float32")
        self.one_hot = np.eye(5, dtype="float32")[[0, 1, 2, 3, 4, 0]]
        self.multi_hot = np.clip(self.one_hot + np.eye(5)[[1, 2, 3, 4, 0, 3]],
                                 0, 1).astype("float32")

    @parameterized.named_parameters(("one_hot", "one_hot"),
                                    ("multi_hot", "multi_hot"))
    def test_matches_numpy_reference(self, kind):
        targets = getattr(self, kind)
        expected = numpy_margin_loss(targets, self.lengths)
        self.assertAllClose(margin_loss(targets, self.lengths), expected,
                            rtol=1e-5)
        self.assertAllClose(MarginLoss()(targets, self.lengths),
                            expected.mean(), rtol=1e-5)

    def test_custom_margins(self):
        loss = MarginLoss(positive_margin=0.95, negative_margin=0.05,
                          negative_weight=0.25, reduction="sum")
        expected = numpy_margin_loss(self.one_hot, self.lengths, 0.95, 0.05,
                                     0.25)
        self.assertAllClose(loss(self.one_hot, self.lengths), expected.sum(),
                            rtol=1e-5)

    def test_hand_computed_value(self):
        # Class 1 present with length 0.7: (0.9 - 0.7)^2 = 0.04; class 0
        # absent with length 0.2: 0.5 * (0.2 - 0.1)^2 = 0.005.
        self.assertAllClose(margin_loss([[0.0, 1.0]], [[0.2, 0.7]]), [0.045],
                            rtol=1e-6)

    def test_loss(self):
        self.run_loss_test(MarginLoss(negative_weight=0.25), self.one_hot,
                           self.lengths)

    def test_mixed_precision(self):
        loss = MarginLoss()
        half = keras.ops.cast(self.lengths, "float16")
        value = loss(self.one_hot, half)
        self.assertEqual(keras.backend.standardize_dtype(value.dtype),
                         "float32")
        self.assertAllClose(value, numpy_margin_loss(
            self.one_hot, self.lengths).mean(), rtol=1e-3)
        bf16 = margin_loss(self.one_hot,
                           keras.ops.cast(self.lengths, "bfloat16"))
        self.assertEqual(keras.backend.standardize_dtype(bf16.dtype),
                         "bfloat16")
        self.assertAllFinite(bf16)

    @parameterized.named_parameters(
        ("negative_margin_above_positive", {"negative_margin": 0.95},
         ValueError, "negative_margin"),
        ("negative_positive_margin", {"positive_margin": -0.1}, ValueError,
         "positive_margin"),
        ("negative_weight", {"negative_weight": -1}, ValueError,
         "negative_weight"),
        ("string_margin", {"positive_margin": "0.9"}, TypeError,
         "positive_margin"),
    )
    def test_bad_arguments(self, kwargs, error, name):
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            MarginLoss(**kwargs)
        with self.assertRaisesRegex(error, f"`{name}`"):
            margin_loss(self.one_hot, self.lengths, **kwargs)


class SparseLabelsTest(TestCase):
    """Integer class ids are one-hot encoded to the classes of `y_pred`."""

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(1)
        self.lengths = rng.uniform(size=(10, 10)).astype("float32")
        self.labels = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
        self.one_hot = np.eye(10, dtype="float32")[self.labels]
        self.expected = numpy_margin_loss(self.one_hot, self.lengths)

    @parameterized.named_parameters(
        ("int64_flat", "int64", (-1,)),
        ("int32_flat", "int32", (-1,)),
        ("int64_column", "int64", (-1, 1)),
        ("int32_column", "int32", (-1, 1)),
        ("float32_column", "float32", (-1, 1)),
    )
    def test_matches_one_hot(self, dtype, shape):
        labels = self.labels.astype(dtype).reshape(shape)
        self.assertAllClose(margin_loss(labels, self.lengths), self.expected,
                            rtol=1e-5)
        self.assertAllClose(MarginLoss()(labels, self.lengths),
                            self.expected.mean(), rtol=1e-5)
        self.assertAllClose(
            MarginLoss()(keras.ops.convert_to_tensor(labels), self.lengths),
            self.expected.mean(), rtol=1e-5)

    def test_issue_example(self):
        # Issue #16: the ids 0..9 used to broadcast against (10, 10) scores.
        labels = np.arange(10)
        expected = numpy_margin_loss(np.eye(10), self.lengths).mean()
        self.assertAllClose(MarginLoss()(labels, self.lengths), expected,
                            rtol=1e-5)

    def test_one_hot_with_batch_equal_to_classes_is_unchanged(self):
        # (batch, num_classes) with batch == num_classes stays one-hot, even
        # though its values could pass for class ids.
        self.assertAllClose(MarginLoss()(self.one_hot, self.lengths),
                            self.expected.mean(), rtol=1e-5)
        self.assertAllClose(margin_loss(self.one_hot, self.lengths),
                            self.expected, rtol=1e-5)

    def test_multi_hot_is_unchanged(self):
        multi_hot = np.clip(self.one_hot + np.eye(10)[self.labels[::-1]], 0,
                            1).astype("float32")
        self.assertAllClose(margin_loss(multi_hot, self.lengths),
                            numpy_margin_loss(multi_hot, self.lengths),
                            rtol=1e-5)

    def test_single_class_column_is_dense(self):
        # With one class, a (batch, 1) target is a dense target, not ids.
        targets = np.array([[1.0], [0.0]], "float32")
        lengths = np.array([[0.5], [0.5]], "float32")
        self.assertAllClose(margin_loss(targets, lengths),
                            numpy_margin_loss(targets, lengths), rtol=1e-6)

    def test_fit_on_integer_labels_matches_one_hot(self):
        def fitted_loss(targets):
            keras.utils.set_random_seed(0)
            inputs = keras.Input((10,))
            outputs = keras.layers.Dense(10, activation="sigmoid")(inputs)
            model = keras.Model(inputs, outputs)
            model.compile(optimizer="sgd", loss=MarginLoss())
            history = model.fit(self.lengths, targets, batch_size=10,
                                epochs=2, verbose=0)
            return history.history["loss"]

        sparse = fitted_loss(self.labels.astype("int64"))
        self.assertAllClose(sparse, fitted_loss(self.one_hot), rtol=1e-5)
        self.assertAllClose(fitted_loss(self.labels.astype("int32")[:, None]),
                            sparse, rtol=1e-5)

    @parameterized.named_parameters(
        ("classes", np.zeros((10, 5), "float32"), r"\(10, 5\)"),
        ("batch", np.zeros((4, 10), "float32"), r"\(4, 10\)"),
        ("ids_batch", np.zeros((4,), "int32"), r"\(4,\)"),
        ("ids_column_batch", np.zeros((4, 1), "int32"), r"\(4, 1\)"),
        ("rank", np.zeros((10, 10, 1, 1), "float32"), r"\(10, 10, 1, 1\)"),
    )
    def test_mismatched_shapes(self, targets, true_shape):
        pattern = rf"`y_true`.*`y_pred`.*y_true.shape={true_shape}.*" \
                  r"y_pred.shape=\(10, 10\)"
        with self.assertRaisesRegex(ValueError, pattern):
            margin_loss(targets, self.lengths)
        with self.assertRaisesRegex(ValueError, pattern):
            MarginLoss()(targets, self.lengths)


def _traced(function):
    """`function` compiled by the backend, or None where it cannot be."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function)
    if backend == "jax":
        import jax

        return jax.jit(function)
    return None


class ClassIdRangeTest(TestCase):
    """Issue #27, defect 12: ids outside [0, num_classes) are refused."""

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(2)
        self.lengths = rng.uniform(size=(4, 10)).astype("float32")
        self.good = np.array([3, 0, 9, 5])

    @parameterized.named_parameters(
        ("ten", 10, "10"),
        ("minus_one", -1, "-1"),
        ("fraction", 2.5, "2.5"),
    )
    def test_eager_ids_outside_the_classes_raise(self, bad, shown):
        labels = self.good.astype("float32")
        labels[2] = bad
        pattern = (rf"`y_true`.*\[0, 10\).*Received: y_true={shown} at "
                   r"index 2")
        for ids in (labels, labels[:, None],
                    keras.ops.convert_to_tensor(labels)):
            with self.assertRaisesRegex(ValueError, pattern):
                margin_loss(ids, self.lengths)
            with self.assertRaisesRegex(ValueError, pattern):
                MarginLoss()(ids, self.lengths)

    def test_traced_ids_outside_the_classes_give_nan_rows(self):
        traced = _traced(margin_loss)
        if traced is None:
            self.skipTest("no traced loss on this backend (eager raises)")
        labels = np.array([3, 10, 9, -1], "int32")
        loss = keras.ops.convert_to_numpy(traced(labels, self.lengths))
        self.assertTrue(np.isnan(loss[[1, 3]]).all())
        expected = numpy_margin_loss(np.eye(10)[self.good], self.lengths)
        self.assertAllClose(loss[[0, 2]], expected[[0, 2]], rtol=1e-5)
        self.assertAllClose(traced(self.good, self.lengths), expected,
                            rtol=1e-5)

    def test_compiled_fit_on_bad_ids_is_nan_or_refused(self):
        inputs = keras.Input((10,))
        outputs = keras.layers.Dense(10, activation="sigmoid")(inputs)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss=MarginLoss())
        labels = np.array([3, 0, 10, 5])
        if _traced(margin_loss) is None:
            # Eager training (PyTorch): the ids are concrete.
            with self.assertRaisesRegex(ValueError, "y_true=10"):
                model.evaluate(self.lengths, labels, verbose=0)
            return
        loss = model.evaluate(self.lengths, labels, verbose=0)
        self.assertTrue(np.isnan(loss))
        self.assertTrue(np.isfinite(
            model.evaluate(self.lengths, self.good, verbose=0)))
