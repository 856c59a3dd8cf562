import os

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.applications.efficient_capsnet import learning_rate_schedule
from keras_caps.testing import TestCase

# Trainable parameters of the capsule network without the decoder, its
# non-trainable parameters (BatchNorm moving statistics), the decoder, and
# the total with the decoder, by hand (kernel + bias):
# MNIST: stem convolutions 5x5 1 -> 32, 3x3 32 -> 64, 64 -> 64, 64 -> 128:
#   832 + 18,496 + 36,928 + 73,856 = 130,112; BatchNorm gamma + beta
#   2 * (32 + 64 + 64 + 128) = 576, and as many moving statistics;
#   primary_caps, depthwise 9x9 over 128 channels: 81*128 + 128 = 10,496;
#   digit_caps, 16 x 8 -> 10 x 16: kernel 10*16*8*16 = 20,480 + prior
#   10*16 = 20,640; 130,112 + 576 + 10,496 + 20,640 = 161,824, the "161K"
#   of Mazzia et al. (2021), Table 2. Decoder 160 -> 512 -> 1024 -> 784:
#   82,432 + 525,312 + 803,600 = 1,411,344; total 161,824 + 576
#   + 1,411,344 = 1,573,744.
# smallNORB: stem 7x7 2 -> 32 (3,168), then as MNIST: 132,448; instance
#   norms gamma + beta 576, no moving statistics; primary_caps 8x8:
#   64*128 + 128 = 8,320; digit_caps 16 x 8 -> 5 x 16: 5*16*8*16 + 5*16
#   = 10,320; 132,448 + 576 + 8,320 + 10,320 = 151,664, the "151K" of
#   Table 4. Decoder: Dense 80 -> 64 (5,184), 3x3 convolutions 1 -> 64
#   (640), 64 -> 128 (73,856), 128 -> 128 (147,584), 128 -> 2 (2,306):
#   229,570; total 151,664 + 229,570 = 381,234.
# MultiMNIST: the MNIST stem and batch norms (130,112 + 576), primary_caps
#   5x5: 25*128 + 128 = 3,328, digit_caps 20,640: 154,656. Decoder as
#   MNIST's with 36*36 = 1,296 outputs: 82,432 + 525,312 + 1,328,400
#   = 1,936,144; total 154,656 + 576 + 1,936,144 = 2,091,376.
# Non-trainable and total counts include FCCaps' routing temperature (+ 1).
PARAMETER_COUNTS = {
    "mnist": (161_824, 576 + 1, 1_411_344, 1_573_744 + 1),
    "smallnorb": (151_664, 0 + 1, 229_570, 381_234 + 1),
    "multi_mnist": (154_656, 576 + 1, 1_936_144, 2_091_376 + 1),
}


def _num_values(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def _batch(dataset, batch_size=2, seed=0):
    model = EfficientCapsNet(dataset, compile=False)
    rng = np.random.default_rng(seed)
    label_shape = tuple(model.input["label"].shape[1:])
    images = rng.uniform(0, 255, (batch_size,) + tuple(
        model.input["image"].shape[1:])).astype("float32")
    classes = rng.permutation(label_shape[-1])[:2]
    labels = np.zeros((batch_size,) + label_shape, dtype="float32")
    if len(label_shape) == 1:
        labels[:, classes[0]] = 1.0
        targets = labels
        recon = images / 255.0
    else:
        labels[:, 0, classes[0]] = 1.0
        labels[:, 1, classes[1]] = 1.0
        targets = labels.sum(axis=1)
        recon = np.stack([images, images], axis=1) / 255.0
    return ({"image": images, "label": labels},
            {"length": targets, "reconstruction": recon})


class EfficientCapsNetTest(TestCase):
    @parameterized.named_parameters(
        (name, name) for name in PARAMETER_COUNTS)
    def test_parameter_counts(self, dataset):
        trainable, non_trainable, decoder, total = PARAMETER_COUNTS[dataset]
        model = EfficientCapsNet(dataset, compile=False)
        decoder_layer = model.get_layer("decoder")
        self.assertEqual(_num_values(model.trainable_weights)
                         - _num_values(decoder_layer.trainable_weights),
                         trainable)
        self.assertEqual(_num_values(model.non_trainable_weights),
                         non_trainable)
        self.assertEqual(decoder_layer.count_params(), decoder)
        self.assertEqual(model.count_params(), total)
        without_decoder = EfficientCapsNet(dataset, reconstruction=False,
                                           compile=False)
        self.assertEqual(_num_values(without_decoder.trainable_weights),
                         trainable)

    @parameterized.named_parameters(
        ("mnist", "mnist"), ("smallnorb", "smallnorb"),
        ("multi_mnist", "multi_mnist"))
    def test_one_training_step_and_predict(self, dataset):
        model = EfficientCapsNet(dataset)
        inputs, targets = _batch(dataset)
        history = model.fit(inputs, targets, batch_size=2, epochs=1,
                            verbose=0)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("reconstruction_loss", history.history)
        predictions = model.predict(inputs, verbose=0)
        self.assertEqual(predictions["length"].shape,
                         targets["length"].shape)
        self.assertEqual(predictions["reconstruction"].shape,
                         targets["reconstruction"].shape)

    def test_named_layers(self):
        model = EfficientCapsNet("mnist", compile=False)
        names = [layer.name for layer in model.layers]
        for name in ("image", "label", "input_scaling", "conv_1",
                     "batch_norm_1", "conv_4", "batch_norm_4",
                     "primary_caps", "digit_caps", "length", "mask",
                     "decoder"):
            self.assertIn(name, names)
        self.assertEqual(model.name, "efficient_capsnet")

    def test_smallnorb_uses_instance_norm_and_input_statistics(self):
        model = EfficientCapsNet(
            "smallnorb", input_statistics=([100.0, 110.0], [400.0, 900.0]),
            compile=False)
        norm = model.get_layer("instance_norm_1")
        self.assertIsInstance(norm, keras.layers.GroupNormalization)
        self.assertEqual(norm.groups, 32)
        scaling = model.get_layer("input_scaling")
        images = np.stack([np.full((1, 48, 48), 120.0),
                           np.full((1, 48, 48), 140.0)], axis=-1)
        self.assertAllClose(scaling(images)[0, 0, 0], [1.0, 1.0], atol=1e-5)
        with self.assertRaisesRegex(ValueError, "per channel \\(2\\)"):
            EfficientCapsNet("smallnorb", input_statistics=([1.0], [1.0]))

    def test_custom_input_shape_and_classes(self):
        model = EfficientCapsNet("mnist", input_shape=(32, 32, 3),
                                 num_classes=4)
        self.assertEqual(model.output["length"].shape, (None, 4))
        self.assertEqual(model.output["reconstruction"].shape,
                         (None, 32, 32, 3))
        primary = model.get_layer("primary_caps")
        self.assertEqual(primary.kernel_size, (11, 11))
        images = np.zeros((2, 32, 32, 3), dtype="float32")
        labels = np.eye(4, dtype="float32")[[0, 1]]
        history = model.fit({"image": images, "label": labels},
                            {"length": labels, "reconstruction": images},
                            epochs=1, verbose=0)
        self.assertAllFinite(history.history["loss"])

    def test_numpy_integer_input_shape(self):
        shape = tuple(np.int64(size) for size in (28, 28, 1))
        model = EfficientCapsNet("mnist", input_shape=shape, compile=False)
        self.assertEqual(model.input["image"].shape, (None, 28, 28, 1))

    def test_without_reconstruction_and_uncompiled(self):
        model = EfficientCapsNet("mnist", reconstruction=False)
        self.assertEqual(model.output_shape, (None, 10))
        self.assertTrue(model.compiled)
        self.assertFalse(EfficientCapsNet("mnist", compile=False).compiled)

    def test_inference_model(self):
        model = EfficientCapsNet("mnist")
        inputs, _ = _batch("mnist", batch_size=3)
        scores = inference_model(model)(inputs["image"])
        self.assertAllClose(scores, model(inputs)["length"], atol=1e-6)
        with_images = inference_model(model, reconstruction=True)(
            inputs["image"])
        self.assertEqual(tuple(with_images["reconstruction"].shape),
                         (3, 28, 28, 1))
        self.assertAllClose(with_images["length"], scores, atol=1e-6)
        with self.assertRaisesRegex(ValueError, "digit_caps"):
            inference_model(keras.Sequential([keras.Input((3,)),
                                              keras.layers.Dense(2)]))

    def test_keras_round_trip(self):
        model = EfficientCapsNet("mnist")
        inputs, _ = _batch("mnist")
        restored = self.run_model_saving_test(model, inputs)
        self.assertIsInstance(restored.loss["length"],
                              type(model.loss["length"]))

    def test_mixed_precision_heads_stay_float32(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = EfficientCapsNet("mnist")
        self.assertEqual(model.output["length"].dtype, "float32")
        self.assertEqual(model.output["reconstruction"].dtype, "float32")
        self.assertEqual(model.get_layer("digit_caps").compute_dtype,
                         "float16")
        self.assertIsInstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        inputs, targets = _batch("mnist")
        history = model.fit(inputs, targets, batch_size=2, epochs=1,
                            verbose=0)
        self.assertAllFinite(history.history["loss"])
        for weight in model.weights:
            self.assertEqual(weight.dtype, "float32")
        # The compile config records the loss-scale wrapper, so the model
        # reloads with all its optimizer state under the float32 policy
        # too (a mismatch would warn, and warnings are errors here).
        path = os.path.join(self.get_temp_dir(), "mixed.keras")
        model.save(path)
        keras.config.set_dtype_policy("float32")
        restored = keras.saving.load_model(path)
        self.assertIsInstance(restored.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        self.assertEqual(restored.get_layer("digit_caps").compute_dtype,
                         "float16")

    def test_learning_rate_schedule(self):
        schedule = learning_rate_schedule("mnist")
        self.assertAllClose(schedule(0), 5e-4)
        self.assertAllClose(schedule(10), 5e-4 * 0.97**10)
        self.assertAllClose(schedule(75), 5e-4 * 0.97**75)
        self.assertAllClose(schedule(76), 5e-5)
        self.assertAllClose(schedule(149), 5e-5)

    @parameterized.named_parameters(
        ("unknown_dataset", {"dataset": "cifar"}, ValueError,
         "Unknown `dataset` for EfficientCapsNet. Expected one of "
         "\\['fashion_mnist', 'mnist', 'multi_mnist', 'smallnorb'\\]. "
         "Received: dataset='cifar'"),
        ("too_small", {"input_shape": (8, 8, 1)}, ValueError,
         "too small for the stem"),
        ("rank", {"input_shape": (28, 28)}, ValueError, "`input_shape`"),
        ("classes", {"num_classes": 0}, ValueError, "`num_classes`"),
        ("one_class_multi", {"dataset": "multi_mnist", "num_classes": 1},
         ValueError, "at least 2 classes"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        with self.assertRaisesRegex(error, message):
            EfficientCapsNet(**kwargs)
