import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from absl.testing import parameterized

from keras_caps import training
from keras_caps.applications import InvertedAttentionCapsNet
from keras_caps.applications.inverted_attention_capsnet import (
    learning_rate_schedule,
)
from keras_caps.testing import TestCase

# Trainable parameters, by hand from the official configs
# (configs/resnet_backbone_CIFAR{10,100}.json of
# apple/ml-capsules-inverted-attention-routing; s x s matrix poses,
# d = s * s: 16 for CIFAR-10, 36 for CIFAR-100).
# ResNet backbone (3x3 kernels, no bias; BatchNorm gamma + beta):
#   stem 27*64 + 128 = 1,856;
#   3 blocks of 64: 3 * (2*36,864 + 2*128) = 221,952;
#   first block of 128 (stride 2, 1x1 shortcut): 73,728 + 147,456 + 2*256
#     + 8,192 + 256 = 230,144;
#   3 more blocks of 128: 3 * (2*147,456 + 2*256) = 886,272;
#   total 1,340,224 (+ 3,200 BatchNorm moving statistics, non-trainable).
# Simple backbone: Conv2D(128, 3x3, stride 2) with bias: 27*128 + 128
#   = 3,584.
# Capsules (kernel + LayerNorm gain and bias 2d per layer):
#   primary 1x1 conv 128 -> 32d: 4,096d + 2d;
#   conv caps 1 and 2, kernel (3, 3, 32, s, s, 32): 9,216d + 2d each
#     (7x7 and 5x5 maps);
#   CIFAR-10 class caps from 5*5*32 = 800 children, kernel
#     (800, s, s, 10): 800*16*10 = 128,000 + 32;
#   CIFAR-100 FC caps 800 -> 20: 800*36*20 = 576,000 + 72; class caps
#     20 -> 100: 20*36*100 = 72,000 + 72;
#   classifier Dense(d -> 1): d + 1.
#   CIFAR-10 (d = 16): 65,536 + 32 + 2 * (147,456 + 32) + 128,000 + 32
#     + 17 = 488,593.
#   CIFAR-100 (d = 36): 147,456 + 72 + 2 * (331,776 + 72) + 576,000 + 72
#     + 72,000 + 72 + 37 = 1,459,405.
# ResNet: 1,340,224 + 488,593 = 1,828,817 (CIFAR-10) and 1,340,224
#   + 1,459,405 = 2,799,629 (CIFAR-100), the official models' counts.
# Simple: 3,584 + 488,593 = 492,177 and 3,584 + 1,459,405 = 1,462,989.
# Non-trainable counts include one routing temperature per routing layer
# (3 for CIFAR-10, 4 for CIFAR-100).
PARAMETER_COUNTS = {
    ("cifar10", "resnet"): (1_828_817, 3_200 + 3),
    ("cifar100", "resnet"): (2_799_629, 3_200 + 4),
    ("cifar10", "simple"): (492_177, 0 + 3),
    ("cifar100", "simple"): (1_462_989, 0 + 4),
}
SMALL = {"backbone": "simple", "input_shape": (16, 16, 3)}


def _num_values(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def _batch(input_shape=(16, 16, 3), num_classes=10, batch_size=2, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (batch_size,) + tuple(input_shape))
    labels = np.eye(num_classes)[rng.integers(0, num_classes, batch_size)]
    return images.astype("float32"), labels.astype("float32")


def _train_one_step(model, images, labels):
    # Eagerly: tracing the training graph costs seconds on a busy 2-core
    # machine; the recipe test trains in graph mode.
    model.run_eagerly = True
    return model.fit(images, labels, batch_size=len(images), epochs=1,
                     verbose=0)


class InvertedAttentionCapsNetTest(TestCase):
    @parameterized.named_parameters(
        (f"{dataset}_{backbone}", dataset, backbone)
        for dataset, backbone in PARAMETER_COUNTS)
    def test_parameter_counts(self, dataset, backbone):
        trainable, non_trainable = PARAMETER_COUNTS[(dataset, backbone)]
        model = InvertedAttentionCapsNet(dataset, backbone=backbone,
                                         compile=False)
        self.assertEqual(_num_values(model.trainable_weights), trainable)
        self.assertEqual(_num_values(model.non_trainable_weights),
                         non_trainable)
        self.assertEqual(model.output_shape,
                         (None, 10 if dataset == "cifar10" else 100))
        names = [layer.name for layer in model.layers]
        for name in ("image", "input_scaling", "primary_conv",
                     "primary_capsules", "primary_norm", "capsule_routing",
                     "classifier", "logits"):
            self.assertIn(name, names)
        if backbone == "resnet":
            for name in ("stem_conv", "stem_batch_norm", "block_1_add",
                         "block_4_shortcut_conv", "block_7_relu_2"):
                self.assertIn(name, names)
        stack = model.get_layer("capsule_routing")
        self.assertEqual(
            [layer.name for layer in stack.layers],
            ["conv_caps_1", "conv_caps_2", "class_caps"]
            if dataset == "cifar10" else
            ["conv_caps_1", "conv_caps_2", "fc_caps", "class_caps"])
        self.assertEqual(model.get_layer("primary_norm").output.shape,
                         (None, 16, 16, 32, 16 if dataset == "cifar10"
                          else 36))

    def test_input_scaling_uses_the_cifar_statistics(self):
        model = InvertedAttentionCapsNet(compile=False, **SMALL)
        scaling = model.get_layer("input_scaling")
        self.assertIsInstance(scaling, keras.layers.Normalization)
        mean = 255.0 * np.array([0.4914, 0.4822, 0.4465])
        std = 255.0 * np.array([0.2023, 0.1994, 0.2010])
        pixel = (mean + std).reshape(1, 1, 1, 3).astype("float32")
        self.assertAllClose(scaling(pixel)[0, 0, 0], [1.0, 1.0, 1.0],
                            atol=1e-4)

    def test_one_training_step_predict_and_batch_of_one(self):
        model = InvertedAttentionCapsNet("cifar100", num_classes=7, **SMALL)
        self.assertTrue(model.compiled)
        self.assertIsInstance(model.loss,
                              keras.losses.CategoricalCrossentropy)
        self.assertTrue(model.loss.from_logits)
        self.assertIsInstance(model.optimizer, keras.optimizers.SGD)
        self.assertAllClose(model.optimizer.momentum, 0.9)
        self.assertAllClose(model.optimizer.learning_rate, 0.1)
        self.assertEqual(model.output_shape, (None, 7))
        images, labels = _batch(num_classes=7)
        history = _train_one_step(model, images, labels)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("accuracy", history.history)
        self.assertEqual(model.predict(images, verbose=0).shape, (2, 7))
        self.assertEqual(model(images[:1]).shape, (1, 7))

    def test_sequential_schedule_and_iterations(self):
        model = InvertedAttentionCapsNet(
            num_iterations=3, schedule="sequential", compile=False, **SMALL)
        stack = model.get_layer("capsule_routing")
        self.assertEqual(stack.schedule, "sequential")
        self.assertEqual(stack.num_iterations, 3)
        images, _ = _batch()
        self.assertAllFinite(model(images))

    def test_keras_round_trip(self):
        model = InvertedAttentionCapsNet(**SMALL)
        images, _ = _batch()
        restored = self.run_model_saving_test(model, images, atol=1e-5,
                                              rtol=1e-5)
        self.assertTrue(restored.loss.from_logits)

    def test_mixed_precision_logits_stay_float32(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = InvertedAttentionCapsNet(**SMALL)
        self.assertEqual(model.output.dtype, "float32")
        self.assertEqual(model.get_layer("capsule_routing").compute_dtype,
                         "float16")
        self.assertEqual(model.get_layer("classifier").compute_dtype,
                         "float32")
        self.assertIsInstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        images, labels = _batch()
        history = _train_one_step(model, images, labels)
        self.assertAllFinite(history.history["loss"])
        self.assertAllFinite(model.predict(images, verbose=0))
        for weight in model.weights:
            self.assertEqual(weight.dtype, "float32")

    def test_learning_rate_schedule(self):
        schedule = learning_rate_schedule("cifar10")
        self.assertAllClose(schedule(0), 0.1)
        self.assertAllClose(schedule(149), 0.1)
        self.assertAllClose(schedule(150), 0.01)
        self.assertAllClose(schedule(250), 0.001)
        self.assertAllClose(schedule(349), 0.001)

    @parameterized.named_parameters(
        ("unknown_dataset", {"dataset": "mnist"}, ValueError,
         "Unknown `dataset` for InvertedAttentionCapsNet. Expected one of "
         "\\['cifar10', 'cifar100'\\]. "
         "Received: dataset='mnist'"),
        ("backbone", {"backbone": "vgg"}, ValueError,
         "`backbone`.*Received: backbone='vgg'"),
        ("schedule", {"schedule": "parallel"}, ValueError,
         "`schedule`.*Received: schedule='parallel'"),
        ("iterations", {"num_iterations": 0}, ValueError,
         "Received: num_iterations=0"),
        ("reconstruction", {"reconstruction": True}, ValueError,
         "no decoder.*--no-reconstruction.*Received: reconstruction=True"),
        ("reconstruction_type", {"reconstruction": "no"}, TypeError,
         "Received: reconstruction='no'"),
        ("num_classes", {"num_classes": 1}, ValueError,
         "at least 2. Received: num_classes=1"),
        ("input_rank", {"input_shape": (32, 32)}, ValueError,
         "Received: input_shape=\\(32, 32\\)"),
        ("input_channels", {"input_shape": (32, 32, 1)}, ValueError,
         "3 colour channels.*Received: input_shape=\\(32, 32, 1\\)"),
        ("input_too_small", {"input_shape": (8, 8, 3)}, ValueError,
         "too small.*'conv_caps_2'.*Received: input_shape=\\(8, 8, 3\\)"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        with self.assertRaisesRegex(error, message):
            InvertedAttentionCapsNet(**{"compile": False, **kwargs})


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the training recipe and export need TensorFlow")
class InvertedAttentionCapsNetRecipeTest(TestCase):
    def test_trains_through_the_command_path(self):
        output_dir = os.path.join(self.get_temp_dir(), "run")
        with tfds.testing.mock_data(num_examples=12):
            record = training.train(
                "inverted_attention_capsnet", "cifar10",
                output_dir=output_dir, epochs=1, steps_per_epoch=2,
                batch_size=4, verbose=0)
        for name in ("model.keras", "metrics.json", "export/saved_model.pb"):
            self.assertTrue(os.path.exists(os.path.join(output_dir, name)),
                            name)
        with open(os.path.join(output_dir, "metrics.json")) as file:
            written = json.load(file)
        self.assertEqual(written["model"], "inverted_attention_capsnet")
        self.assertEqual(written["dataset"], "cifar10")
        self.assertIn("accuracy", record["test"])
        self.assertAllFinite([record["test"]["loss"]])
        # The SavedModel serves raw images, like the saved model.
        model = keras.saving.load_model(os.path.join(output_dir,
                                                     "model.keras"))
        images, _ = _batch((32, 32, 3), batch_size=2)
        served = tf.saved_model.load(os.path.join(output_dir, "export"))
        self.assertAllClose(served.serve(tf.constant(images))["logits"],
                            model.predict(images, verbose=0), atol=1e-4,
                            rtol=1e-4)
