import json
import os

import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.applications import VectorRoutingCapsNet
from keras_caps.applications.vector_routing_capsnet import (
    learning_rate_schedule,
)
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

# Trainable and non-trainable parameters, by hand from the presets and the
# weights of a `VectorRouting` with a fixed number of inputs n and
# num_iterations > 1: score kernel and bias n*d_in + n; vote scale, kernel
# and bias n_out*d_in + d_in*d_out + n_out*d_out; prediction kernel, scale
# and bias d_out*d_in + 2*n_out*d_in; similarity scale and bias, use
# benefit and ignore cost 4*n*n_out. In all:
#   n*d_in + n + 3*n_out*d_in + 2*d_in*d_out + n_out*d_out + 4*n*n_out.
# Stem (3x3 kernels, no bias): MNIST 9*1*32 + 9*32*64 + 9*64*64 + 9*64*128
#   = 288 + 18,432 + 36,864 + 73,728 = 129,312; smallNORB (first kernel
#   5x5, 2 channels) 25*2*32 + 18,432 + 36,864 + 73,728 = 130,624.
# BatchNorm gamma+beta 2*(32+64+64+128) = 576 trainable, the same number of
#   moving statistics non-trainable; feature LayerNorm 2*128 = 256.
# Routings (d_in 128 -> hidden 32x64 -> 32x64 -> C x 1):
#   routing_1, MNIST n = 7*7 = 49: 6,272 + 49 + 12,288 + 16,384 + 2,048
#     + 6,272 = 43,313; smallNORB n = 6*6 = 36: 4,608 + 36 + 12,288
#     + 16,384 + 2,048 + 4,608 = 39,972.
#   routing_2, n = 32, 64 -> 64: 2,048 + 32 + 6,144 + 8,192 + 2,048
#     + 4,096 = 22,560.
#   class_routing, n = 32, 64 -> 1: 2,048 + 32 + 192*C + 128 + C + 128*C
#     = 2,208 + 321*C: 5,418 (C = 10), 3,813 (C = 5).
# MNIST: 129,312 + 576 + 256 + 43,313 + 22,560 + 5,418 = 201,435.
# smallNORB: 130,624 + 576 + 256 + 39,972 + 22,560 + 3,813 = 197,801.
# Non-trainable counts include the routing temperatures of the 3 routings.
PARAMETER_COUNTS = {
    "mnist": (201_435, 576 + 3),
    "fashion_mnist": (201_435, 576 + 3),
    "smallnorb": (197_801, 576 + 3),
}


def _num_values(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


def _batch(input_shape=(28, 28, 1), num_classes=10, batch_size=4, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (batch_size,) + tuple(input_shape))
    labels = np.eye(num_classes)[rng.integers(0, num_classes, batch_size)]
    return images.astype("float32"), labels.astype("float32")


def _train_one_step(model, images, labels):
    # Eagerly: tracing the training graph costs several seconds per model
    # on a busy 2-core machine; the recipe test trains in graph mode.
    model.run_eagerly = True
    return model.fit(images, labels, batch_size=len(images), epochs=1,
                     verbose=0)


class VectorRoutingCapsNetTest(TestCase):
    @parameterized.named_parameters(
        (name, name) for name in PARAMETER_COUNTS)
    def test_parameter_counts(self, dataset):
        trainable, non_trainable = PARAMETER_COUNTS[dataset]
        model = VectorRoutingCapsNet(dataset, compile=False)
        self.assertEqual(_num_values(model.trainable_weights), trainable)
        self.assertEqual(_num_values(model.non_trainable_weights),
                         non_trainable)

    def test_one_training_step_and_predict(self):
        model = VectorRoutingCapsNet("mnist", input_shape=(16, 16, 3),
                                     num_classes=4)
        self.assertTrue(model.compiled)
        self.assertIsInstance(model.loss,
                              keras.losses.CategoricalCrossentropy)
        self.assertTrue(model.loss.from_logits)
        self.assertEqual(model.output_shape, (None, 4))
        self.assertEqual(model.get_layer("routing_1").num_inputs, 16)
        images, labels = _batch((16, 16, 3), num_classes=4)
        history = _train_one_step(model, images, labels)
        self.assertAllFinite(history.history["loss"])
        self.assertIn("accuracy", history.history)
        self.assertEqual(model.predict(images, verbose=0).shape, (4, 4))
        self.assertFalse(VectorRoutingCapsNet("mnist",
                                              compile=False).compiled)

    def test_named_layers(self):
        model = VectorRoutingCapsNet("mnist", compile=False)
        names = [layer.name for layer in model.layers]
        for name in ("image", "input_scaling", "conv_1", "batch_norm_1",
                     "relu_1", "conv_4", "positions", "feature_norm",
                     "routing_1", "routing_2", "class_routing", "logits"):
            self.assertIn(name, names)
        self.assertEqual(model.name, "vector_routing_capsnet")
        routing = model.get_layer("routing_1")
        self.assertEqual(routing.num_inputs, 49)
        self.assertEqual(model.get_layer("class_routing").capsule_dim, 1)

    def test_smallnorb_uses_input_statistics(self):
        model = VectorRoutingCapsNet(
            "smallnorb", input_statistics=([100.0, 110.0], [400.0, 900.0]),
            compile=False)
        self.assertEqual(model.output_shape, (None, 5))
        scaling = model.get_layer("input_scaling")
        self.assertIsInstance(scaling, keras.layers.Normalization)
        images = np.stack([np.full((1, 48, 48), 120.0),
                           np.full((1, 48, 48), 140.0)], axis=-1)
        self.assertAllClose(scaling(images)[0, 0, 0], [1.0, 1.0], atol=1e-5)
        self.assertEqual(model.get_layer("routing_1").num_inputs, 36)
        with self.assertRaisesRegex(ValueError, "per channel \\(2\\)"):
            VectorRoutingCapsNet("smallnorb", input_statistics=([1.0], [1.0]))

    def test_keras_round_trip(self):
        model = VectorRoutingCapsNet("mnist", input_shape=(16, 16, 1))
        images, _ = _batch((16, 16, 1))
        restored = self.run_model_saving_test(model, images, atol=1e-5,
                                              rtol=1e-5)
        self.assertTrue(restored.loss.from_logits)

    def test_mixed_precision_logits_stay_float32(self):
        keras.config.set_dtype_policy("mixed_float16")
        model = VectorRoutingCapsNet("mnist", input_shape=(16, 16, 1))
        self.assertEqual(model.output.dtype, "float32")
        self.assertEqual(model.get_layer("routing_1").compute_dtype,
                         "float16")
        self.assertEqual(model.get_layer("class_routing").compute_dtype,
                         "float32")
        self.assertIsInstance(model.optimizer,
                              keras.optimizers.LossScaleOptimizer)
        images, labels = _batch((16, 16, 1))
        history = _train_one_step(model, images, labels)
        self.assertAllFinite(history.history["loss"])
        self.assertAllFinite(model.predict(images, verbose=0))
        for weight in model.weights:
            self.assertEqual(weight.dtype, "float32")

    def test_learning_rate_schedule(self):
        schedule = learning_rate_schedule("mnist")
        self.assertAllClose(schedule(0), 1e-3)
        self.assertAllClose(schedule(10), 1e-3 * 0.9**10)
        self.assertAllClose(schedule(100), 1e-5)

    @parameterized.named_parameters(
        ("unknown_dataset", {"dataset": "multi_mnist"}, ValueError,
         "Unknown `dataset` for VectorRoutingCapsNet. Expected one of "
         "\\['fashion_mnist', 'mnist', "
         "'smallnorb'\\]. Received: dataset='multi_mnist'"),
        ("reconstruction", {"reconstruction": True}, ValueError,
         "no decoder.*--no-reconstruction.*Received: reconstruction=True"),
        ("reconstruction_type", {"reconstruction": "no"}, TypeError,
         "Received: reconstruction='no'"),
        ("rank", {"input_shape": (28, 28)}, ValueError,
         "`input_shape`.*Received: input_shape=\\(28, 28\\)"),
        ("one_class", {"num_classes": 1}, ValueError,
         "at least 2. Received: num_classes=1"),
        ("classes_type", {"num_classes": "10"}, TypeError,
         "`num_classes`.*Received: num_classes='10'"),
    )
    def test_bad_arguments(self, kwargs, error, message):
        with self.assertRaisesRegex(error, message):
            VectorRoutingCapsNet(**kwargs)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the training recipe and export need TensorFlow")
class VectorRoutingCapsNetRecipeTest(TestCase):
    def test_registered_for_the_recipe(self):
        from keras_caps.applications import MODELS
        from keras_caps.training.best_checkpoint import resolve_monitor

        recipe = MODELS["vector_routing_capsnet"].family
        self.assertIs(recipe.builder, VectorRoutingCapsNet)
        self.assertEqual(recipe.get_preset("mnist")["batch_size"], 32)
        self.assertAllClose(recipe.learning_rate_schedule("mnist")(1), 9e-4)
        with self.assertRaisesRegex(ValueError, "Unknown `dataset`"):
            recipe.get_preset("multi_mnist")
        # The recipe calls the builder with `reconstruction=` and selects
        # the checkpoint on the validation accuracy Keras reports.
        model = recipe.builder("mnist", reconstruction=False)
        model.run_eagerly = True
        images, labels = _batch(batch_size=2)
        history = model.fit(images, labels, validation_data=(images, labels),
                            epochs=1, verbose=0)
        logs = {key: values[-1] for key, values in history.history.items()}
        self.assertEqual(resolve_monitor("auto", logs), "val_accuracy")

    def test_export_serves_class_scores(self):
        import tensorflow as tf

        from keras_caps.export import export_inference_model

        model = VectorRoutingCapsNet("mnist", input_shape=(12, 12, 1))
        path = os.path.join(self.get_temp_dir(), "export")
        exported = export_inference_model(model, path)
        # No labels: the export is the model itself (batch norms folded).
        self.assertEqual(exported.output_shape, model.output_shape)
        loaded = tf.saved_model.load(path)
        for batch_size in (1, 3):
            images, _ = _batch((12, 12, 1), batch_size=batch_size)
            self.assertAllClose(loaded.serve(images)["logits"], model(images),
                                atol=1e-5, rtol=1e-5)

    def test_trains_through_the_recipe(self):
        from keras_caps import training

        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(100, seed=0), synthetic_digits(20, seed=1))
        output_dir = os.path.join(self.get_temp_dir(), "run")
        record = training.train(
            "vector_routing_capsnet", "mnist", output_dir=output_dir,
            epochs=1, batch_size=10, steps_per_epoch=2, data_dir=data_dir,
            verbose=0)  # No decoder: reconstruction defaults to False.
        self.assertEqual(record["monitor"], "val_accuracy")
        self.assertIn("accuracy", record["test"])
        with open(os.path.join(output_dir, "metrics.json")) as file:
            self.assertEqual(json.load(file)["model"],
                             "vector_routing_capsnet")
        self.assertTrue(os.path.exists(os.path.join(output_dir, "export",
                                                    "saved_model.pb")))
        with self.assertRaisesRegex(ValueError, "--no-reconstruction"):
            training.train("vector_routing_capsnet", "mnist",
                           output_dir=output_dir, epochs=1, batch_size=10,
                           data_dir=data_dir, reconstruction=True)
