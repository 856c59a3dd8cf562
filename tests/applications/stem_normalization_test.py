"""The GroupNorm stem of CapsuleClassifier, CNNBaseline and the CNN ladder."""

import os

import keras
import numpy as np
import pytest

from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import CNNBaseline
from keras_caps.applications import PositionCNN
from keras_caps.applications import VectorCNN
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    group_count,
)
from keras_caps.testing import TestCase
from keras_caps.training import TrainingSettings
from tests.applications import stem_counts

_SHAPE = (16, 16, 1)


# By hand (tests/applications/stem_counts.py): the MNIST stem, each
# convolution followed by a GroupNorm with a gamma and a beta per channel
# (as BatchNorm's trainable ones) and no moving statistics; the primary
# capsules' window.
_STEM = stem_counts.STEM
_PRIMARY_16 = stem_counts.WINDOW[16]
_PRIMARY_28 = stem_counts.WINDOW[28]
# DynamicRouting: kernel (16 primary, 8, 10 classes, 16), no bias.
_DYNAMIC = 16 * 8 * 10 * 16
# GAP of 128 channels -> Dense(224) -> Dense(10).
_CNN_HEAD = 128 * 224 + 224 + 224 * 10 + 10


def _batch(num=4, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (num,) + _SHAPE).astype("float32")
    labels = np.eye(10, dtype="float32")[np.arange(num) % 10]
    return images, labels


def _layer_kinds(model):
    return [type(layer).__name__ for layer in model.layers]


class GroupNormStemTest(TestCase):
    def test_group_norm_stem_training_step_and_pinned_counts(self):
        model = CapsuleClassifier("mnist", router="dynamic",
                                  input_shape=_SHAPE, reconstruction=False,
                                  stem_normalization="group")
        self.assertNotIn("BatchNormalization", _layer_kinds(model))
        self.assertEqual(
            [model.get_layer(f"group_norm_{i}").groups for i in range(1, 5)],
            [4, 8, 8, 16])  # 8 channels per group
        self.assertEqual(sum(int(np.prod(w.shape))
                             for w in model.trainable_weights),
                         _STEM + _PRIMARY_16 + _DYNAMIC)
        # Nothing estimated from batches: the only non-trainable weight
        # is the router's temperature.
        self.assertEqual([w.path for w in model.non_trainable_weights],
                         ["digit_caps/temperature"])
        images, labels = _batch()
        model.fit(images, labels, batch_size=2, epochs=1, verbose=0)
        self.assertEqual(int(model.optimizer.iterations.numpy()), 2)
        self.assertTrue(np.all(np.isfinite(model.predict(images,
                                                         verbose=0))))

    def test_cnn_group_norm_training_step_and_round_trip(self):
        model = CNNBaseline("mnist", input_shape=_SHAPE,
                            stem_normalization="group")
        self.assertEqual(model.count_params(), _STEM + _CNN_HEAD)
        images, labels = _batch()
        model.fit(images, labels, batch_size=2, epochs=1, verbose=0)
        self.assertEqual(int(model.optimizer.iterations.numpy()), 2)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        self.assertEqual(_layer_kinds(loaded), _layer_kinds(model))
        self.assertAllClose(loaded.predict(images, verbose=0),
                            model.predict(images, verbose=0), atol=1e-6)

    def test_each_image_is_normalised_by_itself(self):
        # GroupNorm uses no other image of the batch: an image's output
        # is the same alone and in a batch with a shifted image.
        model = CNNBaseline("mnist", input_shape=_SHAPE, compile=False,
                            stem_normalization="group")
        images, _ = _batch()
        alone = model.predict(images[:1], verbose=0)
        batch = np.concatenate([images[:1], images[1:] * 0.2 + 100.0])
        self.assertAllClose(model.predict(batch, verbose=0)[:1], alone,
                            atol=1e-5)

    @pytest.mark.single_backend
    def test_default_is_the_batch_norm_stem_and_bad_values(self):
        default = CNNBaseline("mnist", compile=False)
        batch = CNNBaseline("mnist", compile=False,
                            stem_normalization="batch")
        self.assertEqual(_layer_kinds(default), _layer_kinds(batch))
        self.assertIn("BatchNormalization", _layer_kinds(default))
        # The 28x28 preset: 161,834 trainable parameters either way; the
        # BatchNorm stem adds 2 x 288 moving statistics.
        group = CNNBaseline("mnist", compile=False,
                            stem_normalization="group")
        self.assertEqual(group.count_params(), 161834)
        self.assertEqual(default.count_params(), 161834 + 576)
        # The CNN ladder's steps on the same stem: the counts of
        # tests/applications/controls_test.py without the statistics.
        for builder, count in ((PositionCNN, 161766), (VectorCNN, 161863)):
            ladder = builder("mnist", compile=False, reconstruction=False,
                             stem_normalization="group")
            self.assertNotIn("BatchNormalization", _layer_kinds(ladder))
            self.assertEqual(ladder.count_params(), count)
        for builder in (CNNBaseline, CapsuleClassifier, PositionCNN,
                        VectorCNN):
            with self.assertRaisesRegex(
                    ValueError, "`stem_normalization`.*'batch', 'group'.*"
                    "Received: stem_normalization='layer'"):
                builder("mnist", stem_normalization="layer")
        # Widths that 8 does not divide: the largest divisor below w / 8.
        self.assertEqual([group_count(w) for w in (8, 12, 44, 128)],
                         [1, 1, 4, 16])

    @pytest.mark.single_backend
    def test_training_settings_record_it_only_when_set(self):
        plain = TrainingSettings("cnn", "mnist")
        self.assertNotIn("stem_normalization", plain.to_record())
        self.assertEqual(plain.builder_options(), {})
        group = TrainingSettings("dynamic", "mnist",
                                 stem_normalization="group")
        record = group.resolve().to_record()
        self.assertEqual(record["stem_normalization"], "group")
        self.assertEqual(TrainingSettings.from_record(record),
                         group.resolve())
        self.assertEqual(group.builder_options(),
                         {"stem_normalization": "group"})
        with self.assertRaisesRegex(ValueError, "'capsnet' has no "
                                    "`stem_normalization`"):
            TrainingSettings("capsnet", "mnist", stem_normalization="group")
        with self.assertRaisesRegex(ValueError, "Unknown `stem_normalization"):
            TrainingSettings("cnn", "mnist",
                             stem_normalization="instance")
