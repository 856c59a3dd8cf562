import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import ConvPrimaryCaps
from keras_caps.layers import DynamicRouting
from keras_caps.testing import TestCase
from tests.layers import routing_reference
from tests.layers.weight_options import check_regularizers_and_constraints

# The PrimaryCaps of Sabour et al.'s MNIST CapsNet (9x9 stride 2 on
# 20x20x256 -> 32 types of 8D capsules), and that CapsNet without its
# decoder.
PRIMARY_CAPS_PARAMS = 5_308_672
CAPSNET_MNIST_PARAMS_WITHOUT_DECODER = 6_804_384


class ConvPrimaryCapsTest(TestCase):
    def test_layer(self):
        self.run_layer_test(
            ConvPrimaryCaps,
            {"num_types": 2, "capsule_dim": 3, "kernel_size": 3,
             "strides": 2},
            input_shape=(2, 5, 5, 4),
            expected_output_shape=(2, 2 * 2 * 2, 3),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=0,
            expected_num_parameters=3 * 3 * 4 * 6 + 6,
        )

    @parameterized.named_parameters(
        ("keras_port", 1.0, "position_major"),
        ("official", 1 / 32, "type_major"),
    )
    def test_matches_numpy_reference(self, scale, capsule_order):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 7, 7, 3)).astype("float32")
        layer = ConvPrimaryCaps(2, 3, kernel_size=3, strides=2, scale=scale,
                                capsule_order=capsule_order)
        layer.build(x.shape)
        kernel = rng.normal(size=(3, 3, 3, 6)).astype("float32")
        bias = rng.normal(size=(2, 3)).astype("float32")
        layer.conv.kernel.assign(kernel)
        layer.bias.assign(bias)
        expected = routing_reference.conv_primary_caps(
            x.astype("float64"), kernel.astype("float64"),
            bias.astype("float64"), 2, scale,
            capsule_order == "type_major")
        self.assertAllClose(layer(x), expected, atol=1e-5, rtol=1e-4)

    def test_integer_images_give_the_float_result(self):
        rng = np.random.default_rng(1)
        pixels = rng.integers(0, 256, (2, 7, 7, 3)).astype("uint8")
        layer = ConvPrimaryCaps(2, 3, kernel_size=3, strides=2)
        layer.build(pixels.shape)
        kernel = rng.normal(0, 0.01, (3, 3, 3, 6)).astype("float32")
        bias = rng.normal(size=(2, 3)).astype("float32")
        layer.conv.kernel.assign(kernel)
        layer.bias.assign(bias)
        expected = routing_reference.conv_primary_caps(
            pixels.astype("float64"), kernel.astype("float64"),
            bias.astype("float64"), 2, 1.0, False)
        self.assertAllClose(layer(pixels), expected, atol=1e-5, rtol=1e-4)

    def test_capsnet_mnist_parameter_counts(self):
        primary = ConvPrimaryCaps(32, 8, kernel_size=9, strides=2)
        primary.build((None, 20, 20, 256))
        self.assertEqual(primary.count_params(), PRIMARY_CAPS_PARAMS)
        self.assertEqual(primary.compute_output_shape((None, 20, 20, 256)),
                         (None, 1152, 8))
        inputs = keras.Input((28, 28, 1))
        features = keras.layers.Conv2D(256, 9, activation="relu")(inputs)
        capsules = ConvPrimaryCaps(32, 8, kernel_size=9, strides=2)(features)
        digits = DynamicRouting(10, 16, use_bias=True)(capsules)
        model = keras.Model(inputs, digits)
        self.assertEqual(tuple(capsules.shape), (None, 1152, 8))
        # The paper's count is of trainable parameters (the routing
        # temperature is a non-trainable variable).
        self.assertEqual(
            sum(int(np.prod(w.shape)) for w in model.trainable_weights),
            CAPSNET_MNIST_PARAMS_WITHOUT_DECODER)

    @parameterized.named_parameters(
        ("zero_types", {"num_types": 0}, ValueError, "num_types"),
        ("padding", {"padding": "full"}, ValueError, "padding"),
        ("order", {"capsule_order": "hwt"}, ValueError, "capsule_order"),
        ("scale", {"scale": "1/32"}, TypeError, "scale"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_types": 4, "capsule_dim": 8, "kernel_size": 3,
                  **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            ConvPrimaryCaps(**kwargs)

    def test_bad_input_shapes(self):
        layer = ConvPrimaryCaps(2, 4, kernel_size=3)
        with self.assertRaisesRegex(ValueError, "ndim=4"):
            layer(keras.KerasTensor((None, 5, 5)))
        with self.assertRaisesRegex(ValueError, "larger than.*Received: "):
            layer(keras.KerasTensor((None, 2, 5, 3)))

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, ConvPrimaryCaps,
            {"num_types": 2, "capsule_dim": 3, "kernel_size": 3,
             "strides": 2},
            np.random.default_rng(2).normal(size=(2, 5, 5, 4)),
            {"kernel": ["conv.kernel"], "bias": ["bias"]})
