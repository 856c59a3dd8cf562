import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import layers
from keras_caps.applications import CapsNet
from keras_caps.applications import inference_model
from keras_caps.applications.capsnet import dataset_options
from keras_caps.applications.capsnet import get_preset
from keras_caps.applications.capsnet import learning_rate_schedule
from keras_caps.testing import TestCase

# Trainable parameters of the MNIST capsule network without the decoder,
# the decoder, and the total with the decoder, by hand (kernel + bias):
#   conv_1 9*9*1*256 + 256 = 20,992;
#   primary_caps 9*9*256*(32*8) + 32*8 = 5,308,672;
#   digit_caps, 6*6*32 = 1,152 capsules of 8 -> 10 of 16:
#     1,152*8*10*16 + 10*16 = 1,474,720;
#   without the decoder 20,992 + 5,308,672 + 1,474,720 = 6,804,384.
# Decoder 160 -> 512 -> 1024 -> 784: (160*512 + 512) + (512*1024 + 1024)
#   + (1024*784 + 784) = 82,432 + 525,312 + 803,600 = 1,411,344.
# Total 6,804,384 + 1,411,344 = 8,215,728. Sabour et al. (2017) give
# 6.8M and 8.2M.
MNIST_PARAMETER_COUNTS = (6_804_384, 1_411_344, 8_215_728)

# Small images keep the tests fast: 20 x 20 gives 2 x 2 x 32 = 128
# primary capsules. The primary convolution (5.3M weights) stays full size.
SMALL_SHAPE = (20, 20, 1)
SMALL_CLASSES = 4


def _num_values(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def _small(dataset="mnist", **kwargs):
    kwargs.setdefault("input_shape", SMALL_SHAPE)
    kwargs.setdefault("num_classes", SMALL_CLASSES)
    return CapsNet(dataset, **kwargs)


def _batch(model, batch_size=2, seed=0):
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


class CapsNetTest(TestCase):
    def test_mnist_parameter_counts_and_layers(self):
        # The only full-size model of this file.
        trainable, decoder, total = MNIST_PARAMETER_COUNTS
        model = CapsNet("mnist", compile=False)
        decoder_layer = model.get_layer("decoder")
        self.assertEqual(decoder_layer.count_params(), decoder)
        self.assertEqual(_num_values(model.trainable_weights), total)
        self.assertEqual(_num_values(model.trainable_weights)
                         - _num_values(decoder_layer.trainable_weights),
                         trainable)
        # The only non-trainable state is the routing temperature.
        self.assertEqual(
            [weight.path for weight in model.non_trainable_weights],
            ["digit_caps/temperature"])
        names = [layer.name for layer in model.layers]
        for name in ("image", "label", "input_scaling", "conv_1",
                     "primary_caps", "digit_caps", "length", "mask",
                     "decoder"):
            self.assertIn(name, names)
        self.assertEqual(model.name, "capsnet")
        self.assertEqual(model.get_layer("primary_caps").output.shape,
                         (None, 1152, 8))
        routing = model.get_layer("digit_caps")
        self.assertIsInstance(routing, layers.DynamicRouting)
        self.assertEqual((routing.num_capsules, routing.capsule_dim,
                          routing.num_iterations, routing.use_bias),
                         (10, 16, 3, True))
        self.assertIsInstance(model.get_layer("input_scaling"),
                              keras.layers.Rescaling)
        # Official initialisers: conv1 std 5e-2, capsule layers the
        # default 0.1 of the official `weight_variable`.
        for name, stddev in (("conv_1", 0.05), ("primary_caps", 0.1)):
            layer = model.get_layer(name)
            initializer = layer.kernel_initializer
            self.assertIsInstance(initializer,
                                  keras.initializers.TruncatedNormal)
            self.assertEqual(initializer.stddev, stddev, name)
        self.assertEqual(model.output["length"].shape, (None, 10))
        self.assertEqual(model.output["reconstruction"].shape,
                         (None, 28, 28, 1))

    # Fashion-MNIST's preset is MNIST's (test_presets_...).
    @parameterized.named_parameters(
        ("mnist", "mnist"), ("multi_mnist", "multi_mnist"))
    def test_one_training_step_and_predict(self, dataset):
        model = _small(dataset)
        inputs, targets = _batch(model)
        history = model.fit(inputs, targets, batch_size=2, epochs=1,
                            verbose=0)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("reconstruction_loss", history.history)
        predictions = model.predict(inputs, verbose=0)
        self.assertEqual(predictions["length"].shape,
                         targets["length"].shape)
        self.assertEqual(predictions["reconstruction"].shape,
                         targets["reconstruction"].shape)

    def test_without_reconstruction_and_uncompiled(self):
        model = _small(reconstruction=False, num_iterations=1)
        self.assertEqual(model.output_shape, (None, SMALL_CLASSES))
        self.assertEqual(model.get_layer("digit_caps").num_iterations, 1)
        self.assertTrue(model.compiled)
        self.assertFalse(_small(compile=False).compiled)

    def test_inference_model(self):
        model = _small(compile=False)
        inputs, _ = _batch(model, batch_size=3)
        scores = inference_model(model)(inputs["image"])
        self.assertAllClose(scores, model(inputs)["length"], atol=1e-6)
        with_images = inference_model(model, reconstruction=True)(
            inputs["image"])
        self.assertEqual(tuple(with_images["reconstruction"].shape),
                         (3,) + SMALL_SHAPE)
        self.assertAllClose(with_images["length"], scores, atol=1e-6)

    def test_keras_round_trip(self):
        model = _small()
        inputs, _ = _batch(model)
        restored = self.run_model_saving_test(model, inputs)
        self.assertIsInstance(restored.loss["length"],
                              type(model.loss["length"]))
        self.assertEqual(restored.get_layer("primary_caps").capsule_order,
                         "type_major")

    def test_mixed_precision_heads_stay_float32(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = _small()
        self.assertEqual(model.output["length"].dtype, "float32")
        self.assertEqual(model.output["reconstruction"].dtype, "float32")
        self.assertEqual(model.get_layer("digit_caps").compute_dtype,
                         "float16")
        self.assertIsInstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        inputs, targets = _batch(model)
        history = model.fit(inputs, targets, batch_size=2, epochs=1,
                            verbose=0)
        self.assertAllFinite(history.history["loss"])
        for weight in model.weights:
            self.assertEqual(weight.dtype, "float32")

    def test_presets_and_learning_rate_schedule(self):
        for dataset in ("mnist", "fashion_mnist", "multi_mnist"):
            preset = get_preset(dataset)
            for key in ("batch_size", "epochs", "input_scaling"):
                self.assertIn(key, preset)
            self.assertEqual(preset["batch_size"], 128)
        self.assertIs(get_preset("fashion_mnist"), get_preset("mnist"))
        self.assertEqual(dataset_options("mnist"), {"augmentation": "shift"})
        self.assertEqual(dataset_options("multi_mnist"), {"shift": 4})
        schedule = learning_rate_schedule("mnist")
        # Official: x0.96 every 2,000 steps; 468 steps per epoch.
        self.assertAllClose(schedule(0), 1e-3)
        self.assertAllClose(schedule(1), 1e-3 * 0.96 ** (468 / 2000))
        self.assertAllClose(schedule(100), 1e-3 * 0.96 ** (46_800 / 2000))
        self.assertAllClose(schedule(5000), 1e-6)

    @parameterized.named_parameters(
        ("unknown_dataset", {"dataset": "cifar"}, ValueError,
         "Unknown `dataset` for CapsNet. Expected one of \\['fashion_mnist',"
         " 'mnist', 'multi_mnist'\\]. Received: dataset='cifar'"),
        ("too_small", {"input_shape": (16, 16, 1)}, ValueError,
         "too small for CapsNet.*at least 17x17"),
        ("rank", {"input_shape": (28, 28)}, ValueError, "`input_shape`"),
        ("classes", {"num_classes": 0}, ValueError, "`num_classes`"),
        ("iterations", {"num_iterations": 0}, ValueError,
         "`num_iterations`"),
        ("one_class_multi", {"dataset": "multi_mnist", "num_classes": 1},
         ValueError, "at least 2 classes"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        with self.assertRaisesRegex(error, message):
            CapsNet(**kwargs)
