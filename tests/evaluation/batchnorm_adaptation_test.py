import keras
import numpy as np

from keras_caps.evaluation.batchnorm_adaptation import adapted_batchnorm
from keras_caps.evaluation.batchnorm_adaptation import batchnorm_layers
from keras_caps.testing import TestCase

EPSILON = 1e-3


def _tiny_model(rng):
    """conv 2x2 (2 filters) -> BN -> flatten -> dense 3 -> BN, weights
    and statistics set by hand."""
    inputs = keras.Input((4, 4, 1))
    x = keras.layers.Conv2D(2, 2, name="conv")(inputs)  # (b, 3, 3, 2)
    x = keras.layers.BatchNormalization(epsilon=EPSILON, name="bn_1")(x)
    x = keras.layers.Flatten()(x)  # (b, 18)
    x = keras.layers.Dense(3, name="dense")(x)  # (b, 3)
    x = keras.layers.BatchNormalization(epsilon=EPSILON, name="bn_2")(x)
    model = keras.Model(inputs, x)
    weights = {
        "conv": [rng.normal(size=(2, 2, 1, 2)), rng.normal(size=2)],
        "bn_1": [rng.uniform(0.5, 2, 2), rng.normal(size=2),
                 rng.normal(size=2), rng.uniform(0.5, 2, 2)],
        "dense": [rng.normal(size=(18, 3)), rng.normal(size=3)],
        "bn_2": [rng.uniform(0.5, 2, 3), rng.normal(size=3),
                 rng.normal(size=3), rng.uniform(0.5, 2, 3)],
    }
    for name, values in weights.items():
        model.get_layer(name).set_weights(
            [np.asarray(v, "float32") for v in values])
    return model, weights


def _numpy_conv(images, kernel, bias):
    """Valid 2x2 convolution, stride 1, written out."""
    n, h, w, _ = images.shape
    out = np.zeros((n, h - 1, w - 1, kernel.shape[-1]))
    for i in range(h - 1):
        for j in range(w - 1):
            patch = images[:, i:i + 2, j:j + 2, :]  # (n, 2, 2, 1)
            out[:, i, j, :] = np.einsum("nabc,abco->no", patch, kernel)
    return out + bias


def _normalise(x, gamma, beta, mean, variance):
    return gamma * (x - mean) / np.sqrt(variance + EPSILON) + beta


def _adapted_reference(images, weights):
    """The model with each BN's statistics those of its inputs over all
    `images` (the mean and the variance over batch and positions)."""
    conv = _numpy_conv(images, *weights["conv"])
    gamma, beta = weights["bn_1"][:2]
    x = _normalise(conv, gamma, beta, conv.mean(axis=(0, 1, 2)),
                   conv.var(axis=(0, 1, 2)))
    dense = x.reshape(len(x), -1) @ weights["dense"][0] + weights["dense"][1]
    gamma, beta = weights["bn_2"][:2]
    return _normalise(dense, gamma, beta, dense.mean(axis=0),
                      dense.var(axis=0))


def _frozen_reference(images, weights):
    x = _normalise(_numpy_conv(images, *weights["conv"]), *weights["bn_1"])
    dense = x.reshape(len(x), -1) @ weights["dense"][0] + weights["dense"][1]
    return _normalise(dense, *weights["bn_2"])


class AdaptedBatchnormTest(TestCase):
    def test_adapted_output_equals_numpy_normalisation(self):
        rng = np.random.default_rng(0)
        model, weights = _tiny_model(rng)
        # A shifted, rescaled "corrupted" set: 7 images in batches of 3.
        images = (3.0 * rng.normal(size=(7, 4, 4, 1)) + 2.0).astype(
            "float32")
        self.assertAllClose(model.predict(images, verbose=0),
                            _frozen_reference(images, weights), atol=1e-4)
        before = [np.array(w) for w in model.get_weights()]
        with adapted_batchnorm(model, images, batch_size=3) as layers:
            self.assertEqual([layer.name for layer in layers],
                             ["bn_1", "bn_2"])
            adapted = model.predict(images, verbose=0)
        self.assertAllClose(adapted, _adapted_reference(images, weights),
                            atol=1e-4)
        # The statistics are restored: the model is as it was.
        for old, new in zip(before, model.get_weights(), strict=True):
            np.testing.assert_array_equal(old, new)
        self.assertAllClose(model.predict(images, verbose=0),
                            _frozen_reference(images, weights), atol=1e-4)

    def test_restored_after_an_error_and_bad_input(self):
        rng = np.random.default_rng(1)
        model, _ = _tiny_model(rng)
        images = rng.normal(size=(4, 4, 4, 1)).astype("float32")
        before = [np.array(w) for w in model.get_weights()]
        with self.assertRaisesRegex(RuntimeError, "inside"):
            with adapted_batchnorm(model, images, batch_size=2):
                raise RuntimeError("inside")
        for old, new in zip(before, model.get_weights(), strict=True):
            np.testing.assert_array_equal(old, new)
        with self.assertRaisesRegex(ValueError, "at least one image"):
            with adapted_batchnorm(model, images[:0]):
                pass

    def test_nested_batchnorm_is_refused(self):
        inner_inputs = keras.Input((3,))
        inner = keras.Model(
            inner_inputs, keras.layers.BatchNormalization(name="inner_bn")(
                inner_inputs), name="inner")
        inputs = keras.Input((3,))
        model = keras.Model(inputs, inner(inputs))
        with self.assertRaisesRegex(ValueError, "inner_bn"):
            batchnorm_layers(model)
