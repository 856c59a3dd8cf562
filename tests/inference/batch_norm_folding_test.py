import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.applications import EfficientCapsNet
from keras_caps.inference import fold_batch_normalization
from keras_caps.inference import inference_model
from keras_caps.layers import PrimaryCaps
from keras_caps.testing import TestCase


def _randomise_batch_norms(model, seed=0):
    """Sets statistics and affine weights far from their initial values."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([
                rng.uniform(0.2, 3.0, w.shape).astype("float32")
                if "variance" in w.path or "gamma" in w.path
                else rng.normal(0.0, 1.0, w.shape).astype("float32")
                for w in layer.weights])


def _layer_types(model):
    return [type(layer).__name__ for layer in model.layers]


def _images(shape, seed=1):
    return np.random.default_rng(seed).uniform(
        -1.0, 1.0, shape).astype("float32")


def _batch_norm():
    return keras.layers.BatchNormalization()



def _can_run(model):
    """Whether this backend and device run `model` (TensorFlow 2.21 on a
    CPU has no `channels_first` convolution kernel, and says so when
    called)."""
    try:
        model(_images((1,) + tuple(model.input.shape[1:])))
    except Exception as error:  # noqa: BLE001 - the backend's own type
        if "NHWC" in str(error):
            return False
        raise
    return True

class FoldBatchNormalizationTest(TestCase):
    def _check_same_outputs(self, model, folded, inputs, atol=1e-4):
        expected = keras.tree.flatten(model(inputs, training=False))
        actual = keras.tree.flatten(folded(inputs))
        self.assertEqual(len(actual), len(expected))
        for got, want in zip(actual, expected):
            self.assertAllClose(got, want, atol=atol, rtol=1e-4)

    def test_folds_into_convolutions_depthwise_and_dense(self):
        inputs = keras.Input((12, 12, 3))
        x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
        x = _batch_norm()(x)
        x = keras.layers.Conv2D(5, 3, strides=2, use_bias=False,
                                activation="relu")(x)
        x = _batch_norm()(x)
        x = keras.layers.DepthwiseConv2D(2, depth_multiplier=2)(x)
        x = _batch_norm()(x)  # Feeds Flatten: kept.
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dense(6, activation="relu")(x)
        x = _batch_norm()(x)
        outputs = keras.layers.Dense(3)(x)
        model = keras.Model(inputs, outputs)
        _randomise_batch_norms(model)

        folded = fold_batch_normalization(model)

        self.assertEqual(_layer_types(folded), [
            "InputLayer", "Conv2D", "Conv2D", "DepthwiseConv2D",
            "BatchNormalization", "Flatten", "Dense", "Dense"])
        self.assertTrue(folded.layers[2].use_bias)  # Gained the BN's shift.
        self._check_same_outputs(model, folded, _images((4, 12, 12, 3)))

    def test_matches_numpy_reference_of_one_fold(self):
        # y = conv(a * x + b), written out in NumPy for a 1x1 output.
        inputs = keras.Input((3, 3, 2))
        normalized = keras.layers.BatchNormalization(epsilon=0.0)(inputs)
        outputs = keras.layers.Conv2D(1, 3)(normalized)
        model = keras.Model(inputs, outputs)
        gamma, beta = np.array([2.0, 0.5]), np.array([1.0, -1.0])
        mean, variance = np.array([0.5, 2.0]), np.array([4.0, 0.25])
        model.layers[1].set_weights([gamma, beta, mean, variance])
        kernel = np.arange(18, dtype="float32").reshape(3, 3, 2, 1) / 10
        model.layers[2].set_weights([kernel, np.array([0.3])])
        x = _images((1, 3, 3, 2))

        folded = fold_batch_normalization(model)

        a = gamma / np.sqrt(variance)
        expected = np.sum(kernel[..., 0] * (a * (x[0] - mean) + beta)) + 0.3
        self.assertEqual(_layer_types(folded), ["InputLayer", "Conv2D"])
        self.assertAllClose(keras.ops.convert_to_numpy(folded(x))[0, 0, 0, 0],
                            expected, atol=1e-5)

    def test_folds_into_primary_caps(self):
        inputs = keras.Input((5, 5, 8))
        x = _batch_norm()(inputs)
        outputs = PrimaryCaps(num_capsules=2, capsule_dim=4, kernel_size=5)(x)
        model = keras.Model(inputs, outputs)
        _randomise_batch_norms(model)

        folded = fold_batch_normalization(model)

        self.assertEqual(_layer_types(folded), ["InputLayer", "PrimaryCaps"])
        self._check_same_outputs(model, folded, _images((3, 5, 5, 8)))

    def test_efficient_capsnet_stem_folds_completely(self):
        model = EfficientCapsNet("mnist", compile=False)
        _randomise_batch_norms(model)
        inference = inference_model(model, reconstruction=True)

        folded = fold_batch_normalization(inference)

        self.assertNotIn("BatchNormalization", _layer_types(folded))
        images = np.random.default_rng(0).uniform(
            0, 255, (3, 28, 28, 1)).astype("float32")
        expected = inference(images, training=False)
        actual = folded(images)
        for key in ("length", "reconstruction"):
            self.assertAllClose(actual[key], expected[key], atol=1e-4,
                                rtol=1e-4)

    @parameterized.named_parameters(
        ("same_padding", lambda: keras.layers.Conv2D(2, 3, padding="same")),
        ("grouped", lambda: keras.layers.Conv2D(4, 3, groups=2)),
        ("channels_first", lambda: keras.layers.Conv2D(
            2, 3, data_format="channels_first")),
        ("transposed", lambda: keras.layers.Conv2DTranspose(2, 3)),
        ("nonlinear", lambda: keras.layers.ReLU()),
    )
    def test_keeps_batch_norm_where_the_fold_would_be_inexact(self, consumer):
        inputs = keras.Input((6, 6, 4))
        x = _batch_norm()(inputs)
        model = keras.Model(inputs, consumer()(x))
        _randomise_batch_norms(model)

        folded = fold_batch_normalization(model)

        self.assertIn("BatchNormalization", _layer_types(folded))
        if _can_run(model):  # TensorFlow's CPU convolutions are NHWC only.
            self._check_same_outputs(model, folded, _images((2, 6, 6, 4)))

    def test_keeps_batch_norm_read_twice_or_returned(self):
        inputs = keras.Input((6, 6, 4))
        normalized = _batch_norm()(inputs)
        shared = keras.layers.Conv2D(2, 3)
        twice = keras.Model(inputs, [shared(normalized),
                                     keras.layers.Conv2D(2, 3)(normalized)])
        returned = keras.Model(inputs, [normalized, shared(normalized)])
        other_axis = keras.Model(inputs, keras.layers.Dense(2)(
            keras.layers.BatchNormalization(axis=1)(inputs)))
        for model in (twice, returned, other_axis):
            _randomise_batch_norms(model)
            folded = fold_batch_normalization(model)
            self.assertIn("BatchNormalization", _layer_types(folded))
            self._check_same_outputs(model, folded, _images((2, 6, 6, 4)))

    def test_batch_norm_without_center_or_scale(self):
        inputs = keras.Input((5, 3))
        x = keras.layers.BatchNormalization(center=False, scale=False)(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2, use_bias=False)(x))
        _randomise_batch_norms(model)

        folded = fold_batch_normalization(model)

        self.assertEqual(_layer_types(folded), ["InputLayer", "Dense"])
        self._check_same_outputs(model, folded, _images((4, 5, 3)))

    def test_sequential_model_and_independent_copy(self):
        model = keras.Sequential([
            keras.Input((7, 7, 2)),
            keras.layers.Conv2D(3, 3, activation="relu"),
            _batch_norm(),
            keras.layers.Conv2D(2, 3),
        ])
        _randomise_batch_norms(model)
        images = _images((2, 7, 7, 2))
        before = keras.ops.convert_to_numpy(model(images, training=False))

        folded = fold_batch_normalization(model)
        model.layers[0].kernel.assign(np.zeros(model.layers[0].kernel.shape))

        self.assertEqual(_layer_types(folded),
                         ["InputLayer", "Conv2D", "Conv2D"])
        self.assertAllClose(folded(images), before, atol=1e-4, rtol=1e-4)

    def test_rejects_what_is_not_a_functional_model(self):
        class Subclassed(keras.Model):
            def __init__(self, layer, **kwargs):
                super().__init__(**kwargs)
                self.layer = layer

            def call(self, inputs):
                return self.layer(inputs)

        subclassed = Subclassed(keras.layers.Dense(2))
        subclassed(np.ones((1, 3), "float32"))
        for model in (keras.layers.Dense(2), subclassed):
            with self.assertRaisesRegex(TypeError,
                                        "`model` must be a functional"):
                fold_batch_normalization(model)
        with self.assertRaisesRegex(ValueError, "not built"):
            fold_batch_normalization(keras.Sequential([keras.layers.Dense(2)]))
