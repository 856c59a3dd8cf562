import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import EfficientCapsNet
from keras_caps.inference import inference_model
from keras_caps.inference import serving_model
from keras_caps.testing import TestCase


def _trained_looking_model(seed=0, **kwargs):
    """EfficientCapsNet-MNIST with batch-norm statistics set by hand."""
    model = EfficientCapsNet("mnist", compile=False, **kwargs)
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            mean, variance = layer.moving_mean, layer.moving_variance
            mean.assign(rng.normal(0.0, 0.5, mean.shape).astype("float32"))
            variance.assign(
                rng.uniform(0.5, 2.0, variance.shape).astype("float32"))
    return model


def _images(batch_size=4, seed=1):
    return np.random.default_rng(seed).uniform(
        0, 255, (batch_size, 28, 28, 1)).astype("float32")


def _policies(model):
    return {layer.name: layer.dtype_policy.name for layer in model.layers}


class ServingModelTest(TestCase):
    @parameterized.named_parameters(("scores", False), ("reconstruction", True))
    def test_same_outputs_as_inference_model_without_batch_norms(
            self, reconstruction):
        model = _trained_looking_model()
        expected = inference_model(model, reconstruction=reconstruction)(
            _images(), training=False)

        served = serving_model(model, reconstruction=reconstruction)

        self.assertEqual([layer.name for layer in served.layers
                          if "batch_norm" in layer.name], [])
        self.assertEqual(served.input_shape, (None, 28, 28, 1))
        for got, want in zip(keras.tree.flatten(served(_images())),
                             keras.tree.flatten(expected)):
            self.assertAllClose(got, want, atol=1e-5, rtol=1e-4)

    def test_mixed_bfloat16_convolutions_and_float32_capsules(self):
        model = _trained_looking_model()
        expected = inference_model(model)(_images(8))

        served = serving_model(model, precision="mixed_bfloat16")

        policies = _policies(served)
        for name in ("conv_1", "conv_2", "conv_3", "conv_4", "primary_caps"):
            self.assertEqual(policies[name], "mixed_bfloat16")
        for name in ("input_scaling", "digit_caps", "length"):
            self.assertEqual(policies[name], "float32")
        for weight in served.weights:
            self.assertEqual(weight.dtype, "float32")
        scores = keras.ops.convert_to_numpy(served(_images(8)))
        self.assertEqual(scores.dtype, np.float32)
        # bfloat16 keeps 8 significant bits: scores agree to about 1 %.
        self.assertAllClose(scores, expected, atol=0.02, rtol=0.0)

    def test_float32_precision_undoes_a_mixed_precision_model(self):
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy("mixed_bfloat16")
        try:
            model = _trained_looking_model()
        finally:
            keras.config.set_dtype_policy(previous)
        self.assertEqual(_policies(model)["digit_caps"], "mixed_bfloat16")

        served = serving_model(model, precision="float32")

        self.assertEqual(set(_policies(served).values()), {"float32"})
        self.assertAllFinite(served(_images()))

    def test_independent_of_later_training(self):
        model = _trained_looking_model()
        served = serving_model(model)
        before = keras.ops.convert_to_numpy(served(_images()))

        conv = model.get_layer("conv_2")
        conv.kernel.assign(np.zeros(conv.kernel.shape, "float32"))

        self.assertAllClose(served(_images()), before)

    def test_bad_arguments(self):
        model = EfficientCapsNet("mnist", compile=False)
        with self.assertRaisesRegex(ValueError, "`precision`.*'float64'"):
            serving_model(model, precision="float64")
        with self.assertRaisesRegex(TypeError, "`reconstruction`"):
            serving_model(model, reconstruction="yes")
        with self.assertRaisesRegex(TypeError, "`model` must be"):
            serving_model("model.keras")
