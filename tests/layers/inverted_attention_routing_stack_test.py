import os

import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import InvertedAttentionRouting
from keras_caps.layers import InvertedAttentionRoutingStack
from keras_caps.testing import TestCase
from tests.layers import inverted_attention_reference as reference
from tests.layers.inverted_attention_fixtures import hand_set
from tests.layers.inverted_attention_fixtures import serialized
from tests.layers.inverted_attention_fixtures import three_layer_stack
from tests.layers.inverted_attention_fixtures import to_numpy


def _num_trainable(layer):
    """Trainable scalars: the pinned paper counts (no routing temperature)."""
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


# The capsule routing layers of the CIFAR models of Tsai et al. (2020):
# conv caps 3x3 s2 and 3x3 s1 on a 16x16 map of 32 primary types, then the
# FC capsule layers; a kernel plus LayerNorm gain and bias per layer.
CIFAR10_ROUTING_PARAMS = 423_008  # 147,456 + 32 + 147,456 + 32 + 128,000 + 32
CIFAR100_ROUTING_PARAMS = 1_311_840  # 2 x (331,776 + 72) + 576,072 + 72,072


class InvertedAttentionRoutingStackTest(TestCase):
    @parameterized.named_parameters(
        ("concurrent", "concurrent", True),
        ("sequential", "sequential", False))
    def test_stack_layer(self, schedule, full):
        layers = three_layer_stack().layers
        self.run_layer_test(
            InvertedAttentionRoutingStack,
            {"layers": serialized(*layers), "num_iterations": 2,
             "schedule": schedule},
            input_shape=(2, 7, 6, 2, 4),
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=9,
            expected_num_non_trainable_weights=3,  # temperatures
            expected_num_parameters=(3 * 3 * 2 * 4 * 3 + 8)
            + (2 * 2 * 3 * 4 * 2 + 8) + (2 * 1 * 2 * 4 * 3 + 8),
            run_training_check=full,
            run_mixed_precision_check=full,
        )

    def test_routing_changes_outputs(self):
        # Guards the reference tests: each pass moves the outputs, and the
        # two schedules differ.
        rng = np.random.default_rng(3)
        poses = rng.normal(size=(2, 7, 6, 2, 4))
        stack = three_layer_stack()
        stack.build(poses.shape)
        layers = [hand_set(layer, rng) for layer in stack.layers]
        one = reference.concurrent_routing(poses, layers, 1)
        two = reference.concurrent_routing(poses, layers, 2)
        three = reference.concurrent_routing(poses, layers, 3)
        sequential = reference.sequential_routing(poses, layers, 3)
        self.assertGreater(np.max(np.abs(two - one)), 1e-2)
        self.assertGreater(np.max(np.abs(three - two)), 1e-2)
        self.assertGreater(np.max(np.abs(three - sequential)), 1e-2)
        self.assertAllClose(reference.sequential_routing(poses, layers, 1),
                            one, atol=1e-12)

    @parameterized.named_parameters(
        ("concurrent_2", "concurrent", 2, "matrix"),
        ("concurrent_3", "concurrent", 3, "matrix"),
        ("sequential_2", "sequential", 2, "matrix"),
        ("sequential_3", "sequential", 3, "matrix"),
        ("concurrent_3_vector", "concurrent", 3, "vector"),
        ("sequential_3_vector", "sequential", 3, "vector"),
    )
    def test_stack_matches_numpy_reference(self, schedule, num_iterations,
                                           pose):
        rng = np.random.default_rng(num_iterations)
        poses = rng.normal(size=(2, 7, 6, 2, 4)).astype("float32")
        stack = three_layer_stack(pose, num_iterations=num_iterations,
                                   schedule=schedule)
        stack.build(poses.shape)
        layers = [hand_set(layer, rng) for layer in stack.layers]
        procedure = (reference.concurrent_routing if schedule == "concurrent"
                     else reference.sequential_routing)
        expected = procedure(poses.astype("float64"), layers, num_iterations)
        self.assertAllClose(stack(poses), expected, atol=1e-4, rtol=1e-4)

    @parameterized.named_parameters(
        ("concurrent_2", "concurrent", 2),
        ("concurrent_3", "concurrent", 3),
        ("sequential_3", "sequential", 3),
        ("one_pass", "concurrent", 1),
    )
    def test_stack_couplings_match_numpy_reference(self, schedule,
                                                   num_iterations):
        rng = np.random.default_rng(20 + num_iterations)
        poses = rng.normal(size=(2, 7, 6, 2, 4)).astype("float32")
        stack = three_layer_stack(num_iterations=num_iterations,
                                  schedule=schedule)
        stack.build(poses.shape)
        layers = [hand_set(layer, rng) for layer in stack.layers]
        outputs, couplings = stack(poses, return_couplings=True)
        if schedule == "concurrent":
            expected, history = reference.concurrent_routing(
                poses.astype("float64"), layers, num_iterations,
                return_couplings=True)
            # The last sweep updates only the top layer (the others'
            # updates are unused): a lower layer's last pass is the one
            # before.
            last = [passes[-2 if index < len(layers) - 1 and
                           num_iterations > 1 else -1]
                    for index, passes in enumerate(history)]
        else:
            expected, last = reference.sequential_routing(
                poses.astype("float64"), layers, num_iterations,
                return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        self.assertLen(couplings, 3)
        # 3x2 positions x 3x3 window x 2 types; 2x1 x 2x2 x 3; 2 x 2.
        children = (3 * 2 * 3 * 3 * 2, 2 * 1 * 2 * 2 * 3, 2 * 2)
        for index, (got, want) in enumerate(zip(couplings, last,
                                                strict=True)):
            parents = stack.layers[index].num_capsules
            self.assertEqual(tuple(got.shape),
                             (2, 1, children[index], parents))
            # Reference (B, X, (p, q, n), M) -> the Router layout
            # (B, 1, (X, p, q, n), M).
            self.assertAllClose(got, want.reshape(2, 1, -1, parents),
                                atol=1e-4, rtol=1e-4, msg=f"layer {index}")
            self.assertAllClose(keras.ops.sum(got, axis=3),
                                np.ones((2, 1, children[index])), atol=1e-5)
        # Symbolic: the same shapes, with an unknown batch size.
        _, symbolic = stack(keras.Input(poses.shape[1:]),
                            return_couplings=True)
        self.assertEqual([tuple(c.shape) for c in symbolic],
                         [(None, *c.shape[1:]) for c in couplings])

    def test_stack_of_one_layer_equals_the_layer(self):
        poses = np.random.default_rng(4).normal(size=(2, 5, 4)).astype(
            "float32")
        layer = InvertedAttentionRouting(3, 4, num_iterations=3)
        expected = layer(poses)
        for schedule in ("concurrent", "sequential"):
            stack = InvertedAttentionRoutingStack(
                serialized(layer), num_iterations=3, schedule=schedule)
            stack.build(poses.shape)
            stack.set_weights(layer.get_weights())
            self.assertAllClose(stack(poses), expected, atol=1e-6)

    def test_batch_size_one_in_a_functional_model(self):
        inputs = keras.Input((7, 6, 2, 4))
        outputs = three_layer_stack(num_iterations=2)(inputs)
        model = keras.Model(inputs, outputs)
        data = np.random.default_rng(5).normal(size=(4, 7, 6, 2, 4))
        full = model.predict(data.astype("float32"), batch_size=4, verbose=0)
        single = model.predict(data[:1].astype("float32"), verbose=0)
        self.assertEqual(single.shape, (1, 3, 4))
        self.assertAllClose(single, full[:1], atol=1e-5, rtol=1e-5)

    @parameterized.named_parameters(
        ("mixed_float16", "mixed_float16", 5e-2),
        ("mixed_bfloat16", "mixed_bfloat16", 2e-1),
    )
    def test_mixed_precision_close_to_float32(self, policy, atol):
        poses = np.random.default_rng(6).normal(size=(2, 7, 6, 2, 4)).astype(
            "float32")
        stack = three_layer_stack(num_iterations=3)
        stack.build(poses.shape)
        # Kernels from NumPy, the same on every backend (each backend's own
        # initial draw differs; with PyTorch's, one output of 24 sits where
        # bfloat16 rounding flips a routing decision).
        rng = np.random.default_rng(0)
        stack.set_weights([
            weight if np.all(weight == weight.flat[0])  # LayerNorm's 1, 0
            else rng.normal(scale=np.std(weight), size=weight.shape)
            for weight in stack.get_weights()])
        expected = stack(poses)
        mixed = InvertedAttentionRoutingStack.from_config(
            {**stack.get_config(), "dtype": policy})
        mixed.build(poses.shape)
        mixed.set_weights(stack.get_weights())
        outputs = mixed(poses)
        self.assertEqual(keras.backend.standardize_dtype(outputs.dtype),
                         policy.split("_")[1])
        for weight in mixed.weights:
            self.assertEqual(weight.dtype, "float32")
        self.assertAllClose(outputs, expected, atol=atol, rtol=atol)

    def test_cifar_parameter_counts(self):
        # The ResNet backbone is the application's. The
        # counts do not depend on the initializer; zeros are fast to make.
        zeros = "zeros"
        for pose_dim, fc_layers, routing_params in (
                (16, [(10, 16)], CIFAR10_ROUTING_PARAMS),
                (36, [(20, 36), (100, 36)], CIFAR100_ROUTING_PARAMS)):
            stack = InvertedAttentionRoutingStack(
                [InvertedAttentionRouting(32, pose_dim, kernel_size=3,
                                          strides=2, kernel_initializer=zeros),
                 InvertedAttentionRouting(32, pose_dim, kernel_size=3,
                                          kernel_initializer=zeros)]
                + [InvertedAttentionRouting(*args, kernel_initializer=zeros)
                   for args in fc_layers])
            stack.build((None, 16, 16, 32, pose_dim))
            self.assertEqual(_num_trainable(stack), routing_params)
            self.assertEqual(stack.compute_output_shape(
                (None, 16, 16, 32, pose_dim)),
                (None, fc_layers[-1][0], pose_dim))
            self.assertEqual(tuple(stack.layers[0].kernel.shape),
                             (3, 3, 32, *(2 * [int(pose_dim ** 0.5)]), 32))

    def test_stack_config_round_trip_keeps_children(self):
        stack = three_layer_stack("vector", num_iterations=3,
                                   schedule="sequential")
        revived = InvertedAttentionRoutingStack.from_config(
            stack.get_config())
        self.assertLen(revived.layers, 3)
        for original, copy in zip(stack.layers, revived.layers):
            self.assertEqual(copy.get_config(), original.get_config())
        self.assertEqual(revived.schedule, "sequential")
        self.assertEqual(revived.num_iterations, 3)

    def test_bad_stack_arguments(self):
        layer = InvertedAttentionRouting(3, 4)
        with self.assertRaisesRegex(ValueError,
                                    "`layers`.*Received: layers=\\[\\]"):
            InvertedAttentionRoutingStack([])
        with self.assertRaisesRegex(TypeError,
                                    "`layers`.*Received: layers\\[1\\]="):
            InvertedAttentionRoutingStack([layer, keras.layers.Dense(3)])
        with self.assertRaisesRegex(ValueError, "same layer appears twice"):
            InvertedAttentionRoutingStack([layer, layer])
        with self.assertRaisesRegex(ValueError, "layers\\[0\\] is fully "
                                    "connected.*Received: layers\\[1\\]"):
            InvertedAttentionRoutingStack(
                [layer, InvertedAttentionRouting(3, 4, kernel_size=1)])
        with self.assertRaisesRegex(ValueError, "`schedule`.*Received: "
                                    "schedule='jacobi'"):
            InvertedAttentionRoutingStack([layer], schedule="jacobi")
        with self.assertRaisesRegex(ValueError, "`num_iterations`"):
            InvertedAttentionRoutingStack([layer], num_iterations=0)

    def test_mismatched_stack_shapes(self):
        # Matrix poses of 3x3 above 2x2 ones.
        stack = InvertedAttentionRoutingStack([
            InvertedAttentionRouting(3, 4, kernel_size=2),
            InvertedAttentionRouting(3, 9)])
        with self.assertRaisesRegex(ValueError, "cannot feed layers\\[1\\].*"
                                    "outputs of layers\\[0\\].*capsule_dim=9"
                                    ".*Received: input_shape=\\(None, 2, 2, "
                                    "3, 4\\)"):
            stack(keras.KerasTensor((None, 3, 3, 2, 4)))
        # A kernel larger than the map below it.
        stack = InvertedAttentionRoutingStack([
            InvertedAttentionRouting(3, 4, kernel_size=3, strides=2),
            InvertedAttentionRouting(3, 4, kernel_size=3)])
        with self.assertRaisesRegex(ValueError, "layers\\[1\\].*larger than "
                                    "its 2x2 capsule map"):
            stack.compute_output_shape((None, 5, 5, 2, 4))
        with self.assertRaisesRegex(ValueError, "layers\\[0\\].*its inputs"
                                    ".*5-D capsule map"):
            stack.build((None, 5, 4))

    @pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                        reason="SavedModel export needs TensorFlow")
    def test_saved_model_export(self):
        import tensorflow as tf

        inputs = keras.Input((7, 6, 2, 4))
        outputs = three_layer_stack(num_iterations=3)(inputs)
        model = keras.Model(inputs, outputs)
        path = os.path.join(self.get_temp_dir(), "exported")
        model.export(path, format="tf_saved_model", verbose=False)
        loaded = tf.saved_model.load(path)
        rng = np.random.default_rng(8)
        for batch in (1, 3):
            x = rng.normal(size=(batch, 7, 6, 2, 4)).astype("float32")
            self.assertAllClose(loaded.serve(x), model(x), atol=1e-5,
                                rtol=1e-5)

    def test_stack_collects_its_layers_regularization_losses(self):
        stack = InvertedAttentionRoutingStack([
            InvertedAttentionRouting(
                3, 4, kernel_size=2,
                kernel_regularizer=keras.regularizers.L2(0.01)),
            InvertedAttentionRouting(
                2, 4, kernel_regularizer=keras.regularizers.L1(0.03)),
        ])
        stack(np.random.default_rng(3).normal(size=(2, 3, 3, 2, 4)))
        bottom, top = (to_numpy(layer.kernel).astype("float64")
                       for layer in stack.layers)
        self.assertAllClose(
            sorted(float(to_numpy(loss)) for loss in stack.losses),
            sorted([0.01 * np.sum(bottom**2), 0.03 * np.sum(np.abs(top))]),
            rtol=1e-5)
        revived = InvertedAttentionRoutingStack.from_config(
            stack.get_config())
        self.assertIsInstance(revived.layers[1].kernel_regularizer,
                              keras.regularizers.L1)


def test_stack_rejects_a_child_built_for_another_shape():
    child = InvertedAttentionRouting(3, 4, pose="vector")
    child.build((None, 5, 4))
    stack = InvertedAttentionRoutingStack([child])
    with pytest.raises(ValueError, match="already built for \\(None, 5, 4\\)"
                       ".*Received: input_shape=\\(2, 7, 4\\)"):
        stack(np.zeros((2, 7, 4), dtype="float32"))
