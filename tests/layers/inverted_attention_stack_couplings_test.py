"""The stack's `return_couplings`: each layer's last pass, Router layout."""

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import layers
from keras_caps.testing import TestCase


class StackCouplingsTest(TestCase):
    @parameterized.named_parameters(("concurrent", "concurrent"),
                                    ("sequential", "sequential"))
    def test_one_layer_stack_returns_the_layers_couplings(self, schedule):
        keras.utils.set_random_seed(2)
        layer = layers.InvertedAttentionRouting(4, 4, kernel_size=2,
                                                num_iterations=3)
        stack = layers.InvertedAttentionRoutingStack(
            [layer], num_iterations=3, schedule=schedule)
        inputs = np.random.default_rng(0).normal(
            size=(2, 3, 3, 2, 4)).astype("float32")
        poses, couplings = stack(inputs, return_couplings=True)
        expected_poses, expected = layer(inputs, return_couplings=True)
        self.assertLen(couplings, 1)
        self.assertAllClose(couplings[0], expected, atol=1e-6)
        self.assertAllClose(poses, expected_poses, atol=1e-6)

    @parameterized.named_parameters(("concurrent", "concurrent"),
                                    ("sequential", "sequential"))
    def test_every_layer_in_order_and_symbolic(self, schedule):
        stack = layers.InvertedAttentionRoutingStack(
            [layers.InvertedAttentionRouting(4, 4, kernel_size=3, strides=2),
             layers.InvertedAttentionRouting(10, 4)], num_iterations=2,
            schedule=schedule)
        inputs = np.random.default_rng(1).normal(
            size=(2, 7, 7, 3, 4)).astype("float32")
        poses, couplings = stack(inputs, return_couplings=True)
        self.assertAllClose(poses, stack(inputs))
        # 3 x 3 positions x (3 x 3 window x 3 types), then 36 children.
        self.assertEqual([tuple(c.shape) for c in couplings],
                         [(2, 1, 243, 4), (2, 1, 36, 10)])
        for tensor in couplings:
            values = keras.ops.convert_to_numpy(tensor)
            self.assertAllClose(values.sum(axis=-1),
                                np.ones(values.shape[:-1]), atol=1e-5)
        symbolic = keras.Input((7, 7, 3, 4))
        _, specs = stack(symbolic, return_couplings=True)
        self.assertEqual([tuple(s.shape) for s in specs],
                         [(None, 1, 243, 4), (None, 1, 36, 10)])
