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
