import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import PrimaryCaps
from keras_caps.testing import TestCase
from keras_caps.testing import value_and_gradients
from tests.layers import reference
from tests.layers.weight_options import check_regularizers_and_constraints


class PrimaryCapsTest(TestCase):
    def test_layer(self):
        self.run_layer_test(
            PrimaryCaps,
            {"num_capsules": 8, "capsule_dim": 4, "kernel_size": 3,
             "strides": 2},
            input_shape=(2, 5, 5, 8),
            expected_output_shape=(2, 8, 4),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=0,
            expected_num_parameters=3 * 3 * 8 + 8,
        )

    @parameterized.named_parameters(
        ("mnist", (9, 9, 128), 9, 1, 10_496),
        ("smallnorb", (8, 8, 128), 8, 1, 8_320),
        ("multi_mnist", (6, 6, 128), 5, 2, 3_328),
    )
    def test_official_parameter_counts(self, shape, kernel_size, strides,
                                       expected):
        layer = PrimaryCaps(16, 8, kernel_size=kernel_size, strides=strides)
        layer.build((None,) + shape)
        self.assertEqual(layer.count_params(), expected)

    # 5x5 maps of 6 channels: stride 1 gives 3x3x6 = 9 capsules of 6,
    # stride 2 gives 2x2x6 = 8 capsules of 3.
    @parameterized.parameters((1, 9, 6), (2, 8, 3))
    def test_matches_numpy_reference(self, strides, num_capsules,
                                     capsule_dim):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(3, 5, 5, 6)).astype("float32")
        layer = PrimaryCaps(num_capsules=num_capsules,
                            capsule_dim=capsule_dim, kernel_size=3,
                            strides=strides)
        layer.build(x.shape)
        kernel = rng.normal(size=(3, 3, 6)).astype("float32")
        bias = rng.normal(size=(6,)).astype("float32")
        layer.set_weights([kernel[..., None], bias])
        expected = reference.primary_caps(
            x.astype("float64"), kernel, bias, strides, layer.num_capsules,
            layer.capsule_dim)
        self.assertAllClose(layer(x), expected, atol=1e-5, rtol=1e-4)

    # A 3x3 window on 3x3 maps (the einsum path) and on 5x5 maps (the
    # depthwise convolution).
    @parameterized.parameters((3, 1, 6), (5, 9, 6))
    def test_integer_images_give_the_float_result(self, size, num_capsules,
                                                  capsule_dim):
        rng = np.random.default_rng(2)
        pixels = rng.integers(0, 256, (2, size, size, 6)).astype("uint8")
        layer = PrimaryCaps(num_capsules=num_capsules,
                            capsule_dim=capsule_dim, kernel_size=3)
        layer.build(pixels.shape)
        kernel = rng.normal(0, 0.01, (3, 3, 6)).astype("float32")
        bias = rng.normal(size=(6,)).astype("float32")
        layer.set_weights([kernel[..., None], bias])
        expected = reference.primary_caps(
            pixels.astype("float64"), kernel, bias, 1, num_capsules,
            capsule_dim)
        for dtype in ("uint8", "int32"):
            outputs = layer(pixels.astype(dtype))
            self.assertEqual(keras.backend.standardize_dtype(outputs.dtype),
                             "float32")
            self.assertAllClose(outputs, expected, atol=1e-5, rtol=1e-4)

    def test_equals_official_grouped_convolution(self):
        # The official code uses Conv2D(F, K, groups=F); its kernel
        # (K, K, 1, F) converts to the depthwise (K, K, F, 1) by a reshape.
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, 4, 4, 8)).astype("float32")
        grouped = keras.layers.Conv2D(8, 4, groups=8)
        grouped.build(x.shape)
        layer = PrimaryCaps(num_capsules=2, capsule_dim=4, kernel_size=4)
        layer.build(x.shape)
        self.assertEqual(layer.count_params(), grouped.count_params())
        kernel, bias = grouped.get_weights()
        bias = rng.normal(size=bias.shape).astype("float32")
        grouped.set_weights([kernel, bias])
        layer.set_weights([kernel.reshape(4, 4, 8, 1), bias])
        features = keras.ops.convert_to_numpy(grouped(x)).reshape(2, 2, 4)
        self.assertAllClose(layer(x), reference.squash(features), atol=1e-5)

    @parameterized.named_parameters(("float32", "float32", 1e-5),
                                    ("mixed_bfloat16", "mixed_bfloat16", 0.05))
    def test_full_window_equals_depthwise_convolution_with_gradients(
            self, dtype, atol):
        # A window covering the whole map takes a dot-product shortcut: same
        # values and gradients as the depthwise convolution of a window that
        # does not (the map padded by one row and column, stride 2).
        rng = np.random.default_rng(2)
        x = rng.normal(size=(3, 4, 4, 8)).astype("float32")
        padded = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))
        weights = [rng.normal(size=(4, 4, 8, 1)).astype("float32"),
                   rng.normal(size=(8,)).astype("float32")]
        shortcut = PrimaryCaps(num_capsules=2, capsule_dim=4, kernel_size=4,
                               dtype=dtype)
        convolution = PrimaryCaps(num_capsules=2, capsule_dim=4,
                                  kernel_size=4, strides=2, dtype=dtype)
        shortcut.build(x.shape)
        convolution.build(padded.shape)
        shortcut.set_weights(weights)
        convolution.set_weights(weights)

        self.assertTrue(shortcut._covers_input)
        self.assertFalse(convolution._covers_input)
        outputs, gradients = value_and_gradients(shortcut, x)
        expected, expected_gradients = value_and_gradients(convolution,
                                                           padded)

        self.assertAllClose(keras.ops.cast(outputs, "float32"),
                            keras.ops.cast(expected, "float32"), atol=atol)
        self.assertAllClose(gradients[0], expected_gradients[0][:, :4, :4],
                            atol=atol)
        for got, want in zip(gradients[1:], expected_gradients[1:]):
            self.assertAllClose(got, want, atol=atol, rtol=atol)

    def test_sabour_squash(self):
        x = np.random.default_rng(2).normal(size=(2, 3, 3, 4))
        layer = PrimaryCaps(2, 2, kernel_size=3, squash="sabour")
        layer.build(x.shape)
        kernel, bias = layer.get_weights()
        expected = reference.primary_caps(x, kernel[..., 0], bias, 1, 2, 2,
                                          variant="sabour")
        self.assertAllClose(layer(x.astype("float32")), expected, atol=1e-5,
                            rtol=1e-4)

    @parameterized.named_parameters(
        ("zero_capsules", {"num_capsules": 0}, ValueError, "num_capsules"),
        ("float_dim", {"capsule_dim": 2.5}, TypeError, "capsule_dim"),
        ("bool_dim", {"capsule_dim": True}, TypeError, "capsule_dim"),
        ("kernel_triple", {"kernel_size": (3, 3, 3)}, ValueError,
         "kernel_size"),
        ("negative_strides", {"strides": -1}, ValueError, "strides"),
        ("squash_name", {"squash": "hinton"}, ValueError, "squash"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, "kernel_size": 3,
                  **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            PrimaryCaps(**kwargs)

    def test_bad_input_shapes(self):
        layer = PrimaryCaps(4, 4, kernel_size=3)
        with self.assertRaisesRegex(ValueError, "ndim=4"):
            layer(keras.KerasTensor((None, 9, 16)))
        with self.assertRaisesRegex(
                ValueError, "kernel_size of \\(9, 9\\).*height 5.*"
                "input_shape=\\(None, 5, 5, 16\\)"):
            PrimaryCaps(4, 4, kernel_size=9)(keras.KerasTensor(
                (None, 5, 5, 16)))
        with self.assertRaisesRegex(
                ValueError, "num_capsules \\* capsule_dim = 16 values.*"
                "1x1x18 = 18"):
            layer(keras.KerasTensor((None, 3, 3, 18)))

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, PrimaryCaps,
            {"num_capsules": 4, "capsule_dim": 4, "kernel_size": 3},
            np.random.default_rng(2).normal(size=(2, 3, 3, 16)),
            {"kernel": ["depthwise_conv.kernel"],
             "bias": ["depthwise_conv.bias"]})
