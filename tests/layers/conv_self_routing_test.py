"""`ConvSelfRouting` against a NumPy loop over output positions (Hahn et
al., 2019, §3)."""

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import ConvSelfRouting
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import self_routing_reference as reference
from tests.layers.self_routing_test import capsules
from tests.layers.self_routing_test import hand_set
from tests.layers.self_routing_test import numpy


def expected_batch(grid, weights, strides, padding):
    """`(outputs (b, H', W', C, z + 1), couplings (b, 1, children, C))`."""
    outputs, couplings = [], []
    for example in grid.astype("float64"):
        poses, activations, coupling = reference.conv_route(
            example[..., :-1], example[..., -1], *weights, strides=strides,
            padding=padding)
        outputs.append(np.concatenate([poses, activations[..., None]], -1))
        couplings.append(coupling[None])
    return np.stack(outputs), np.stack(couplings)


def num_parameters(kernel, types, pose_dim, parents, capsule_dim):
    # W_pose, W_route and b_route per (kernel offset, child type).
    return kernel * types * (pose_dim * parents * capsule_dim
                             + pose_dim * parents + parents)


class ConvSelfRoutingTest(TestCase):
    @parameterized.named_parameters(
        ("same_strides_2", {"strides": 2}, (2, 5, 4, 2, 4),
         (2, 3, 2, 2, 3), num_parameters(9, 2, 3, 2, 2), True),
        ("valid_vectors",
         {"kernel_size": (2, 3), "padding": "valid",
          "input_format": "vectors", "output_format": "vectors"},
         (2, 3, 4, 2, 3), (2, 2, 2, 2, 2), num_parameters(6, 2, 3, 2, 2),
         False),
    )
    def test_layer(self, options, input_shape, output_shape, parameters,
                   full):
        rng = np.random.default_rng(0)
        if options.get("input_format") == "vectors":
            data = rng.normal(size=input_shape).astype("float32")
        else:
            data = capsules(rng, input_shape)
        self.run_layer_test(
            ConvSelfRouting,
            {"num_capsules": 2, "capsule_dim": 2, **options},
            input_data=data, expected_output_shape=output_shape,
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=parameters,
            run_training_check=full, run_saving_check=full,
            run_mixed_precision_check=full)

    @parameterized.named_parameters(
        ("same_strides_1", 3, 1, "same"),
        ("same_strides_2", 3, 2, "same"),
        ("valid_strides_2", 3, 2, "valid"),
        ("same_even_kernel", 2, 1, "same"),
    )
    def test_matches_numpy_loop_over_positions(self, kernel, stride,
                                               padding):
        rng = np.random.default_rng(kernel + 10 * stride)
        grid = capsules(rng, (2, 5, 5, 2, 4))
        layer = ConvSelfRouting(3, 2, kernel_size=kernel, strides=stride,
                                padding=padding)
        layer.build(grid.shape)
        weights = hand_set(layer, rng)
        expected, expected_couplings = expected_batch(
            grid, weights, (stride, stride), padding)
        outputs, couplings = layer(grid, return_couplings=True)
        self.assertAllClose(numpy(outputs), expected, atol=1e-5, rtol=1e-4)
        self.assertAllClose(numpy(couplings), expected_couplings,
                            atol=1e-6)
        self.assertEqual(layer.couplings_grid(grid.shape),
                         expected.shape[1:3])
        trace = layer.routing_trace(grid)
        self.assertEqual(tuple(trace["votes"].shape),
                         (2, couplings.shape[2], 3, 2))

    @parameterized.named_parameters(
        ("float32", "float32"), ("mixed_float16", "mixed_float16"))
    def test_a_window_of_children_that_are_off(self, policy):
        rng = np.random.default_rng(4)
        grid = capsules(rng, (2, 4, 4, 2, 3))
        grid[:, :2, :2, :, -1] = 0.0  # the top-left 2 x 2 block is off
        layer = ConvSelfRouting(2, 2, kernel_size=2, strides=2,
                                padding="valid", dtype=policy)
        layer.build(grid.shape)
        weights = hand_set(layer, rng)
        outputs, gradients = value_and_gradients(layer, grid)
        outputs = numpy(outputs)
        # Documented: parents whose window is off get activation 0 and
        # pose 0; the others are unchanged.
        self.assertAllClose(outputs[:, 0, 0], np.zeros((2, 2, 3)))
        self.assertAllFinite(gradients, f"gradients under {policy}")
        if policy == "float32":
            # The reference divides 0 by 0 at the window that is off.
            with np.errstate(invalid="ignore", divide="ignore"):
                expected, _ = expected_batch(grid, weights, (2, 2), "valid")
            self.assertAllClose(outputs[:, 1:], expected[:, 1:],
                                atol=1e-5, rtol=1e-4)

    def test_bad_arguments_name_the_argument(self):
        for name, options in (("num_capsules", {"num_capsules": 0}),
                              ("capsule_dim", {"capsule_dim": -2}),
                              ("kernel_size", {"kernel_size": 0}),
                              ("strides", {"strides": (1, 0)}),
                              ("padding", {"padding": "full"}),
                              ("input_format", {"input_format": "poses"})):
            with self.assertRaisesRegex(ValueError, name):
                ConvSelfRouting(**{"num_capsules": 2, "capsule_dim": 2,
                                   **options})

    def test_bad_inputs_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "kernel_size"):
            ConvSelfRouting(2, 2, kernel_size=4, padding="valid")(
                np.ones((1, 3, 5, 2, 3)))
        with self.assertRaisesRegex(ValueError, "last axis of `inputs`"):
            ConvSelfRouting(2, 2)(np.ones((1, 3, 3, 2, 1)))
        with self.assertRaisesRegex(ValueError, "`inputs`"):
            ConvSelfRouting(2, 2)(np.ones((1, 3, 3, 3)))
        layer = ConvSelfRouting(2, 2)
        layer(np.ones((1, 3, 3, 2, 3)))
        with self.assertRaisesRegex(ValueError, "built for"):
            layer.compute_output_shape((1, 4, 3, 2, 3))
        self.assertEqual(keras.ops.shape(layer(np.ones((1, 3, 3, 2, 3)))),
                         (1, 3, 3, 2, 3))
