import os

import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import InvertedAttentionRouting
from keras_caps.layers import InvertedAttentionRoutingStack
from keras_caps.testing import TestCase
from tests.layers import inverted_attention_reference as reference
from tests.layers.weight_options import check_regularizers_and_constraints

# routing.md §2.6: the capsule part of the CIFAR ResNet-backbone models
# (conv caps 3x3 s2 and 3x3 s1 on a 16x16 map of 32 primary types, then
# the FC capsule layers), and the whole models' totals.
# routing.md §2.6: the capsule routing layers of the CIFAR models (kernel
# plus LayerNorm gain and bias per layer).
CIFAR10_ROUTING_PARAMS = 423_008  # 147,456 + 32 + 147,456 + 32 + 128,000 + 32
CIFAR100_ROUTING_PARAMS = 1_311_840  # 2 x (331,776 + 72) + 576,072 + 72,072


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _serialized(*layers):
    return [keras.saving.serialize_keras_object(layer) for layer in layers]


def _hand_set(layer, rng, scale=0.8):
    """Sets the layer's kernel and LayerNorm by hand; returns its reference.

    The kernel is large enough for routing to change the couplings, and
    the LayerNorm gain and bias are not the identity.
    """
    kernel = (rng.normal(size=tuple(layer.kernel.shape)) * scale).astype(
        "float32")
    layer.kernel.assign(kernel)
    gamma = beta = None
    if layer.layer_norm is not None:
        gamma = (1.0 + 0.3 * rng.normal(size=layer.capsule_dim)).astype(
            "float32")
        beta = (0.2 * rng.normal(size=layer.capsule_dim)).astype("float32")
        layer.layer_norm.gamma.assign(gamma)
        layer.layer_norm.beta.assign(beta)
        gamma, beta = gamma.astype("float64"), beta.astype("float64")
    strides = None if layer.kernel_size is None else layer.strides[0]
    return reference.Layer(kernel.astype("float64"), layer.pose, strides,
                           gamma, beta, layer.epsilon)


def _three_layer_stack(pose="matrix", **kwargs):
    """conv 3x3 s2 -> conv 2x2 s1 -> FC, on a (7, 6) map of 2 types."""
    if pose == "matrix":
        dims = (4, 4, 4)
    else:
        dims = (4, 2, 5)
    layers = [
        InvertedAttentionRouting(3, dims[0], kernel_size=3, strides=2,
                                 pose=pose),
        InvertedAttentionRouting(2, dims[1], kernel_size=2, pose=pose),
        InvertedAttentionRouting(3, dims[2], pose=pose),
    ]
    return InvertedAttentionRoutingStack(layers, **kwargs)


class InvertedAttentionRoutingTest(TestCase):
    @parameterized.named_parameters(
        # The full check (training step, mixed precision, saving) for one
        # case of each form; the other variants skip the slow parts, which
        # do not depend on the options.
        ("fc_vector_on_a_map",
         {"num_capsules": 3, "capsule_dim": 2, "pose": "vector",
          "dropout": 0.1}, (2, 2, 2, 2, 3), (2, 3, 2), 8 * 3 * 3 * 2 + 4,
         True),
        ("conv_matrix_strides_2",
         {"num_capsules": 2, "capsule_dim": 4, "kernel_size": 3,
          "strides": 2}, (2, 7, 6, 2, 4), (2, 3, 2, 2, 4),
         3 * 3 * 2 * 2 * 2 * 2 + 8, True),
        ("fc_matrix", {"num_capsules": 3, "capsule_dim": 4,
                       "num_iterations": 3}, (2, 5, 4), (2, 3, 4),
         5 * 2 * 2 * 3 + 8, False),
        ("conv_vector_dim_1",
         {"num_capsules": 2, "capsule_dim": 1, "kernel_size": (2, 1),
          "pose": "vector", "num_iterations": 1}, (2, 3, 3, 2, 3),
         (2, 2, 3, 2, 1), 2 * 1 * 2 * 3 * 2 * 1, False),
    )
    def test_layer(self, options, input_shape, output_shape, num_parameters,
                   full):
        # capsule_dim 1 has no LayerNorm, hence one weight.
        self.run_layer_test(
            InvertedAttentionRouting,
            options,
            input_shape=input_shape,
            expected_output_shape=output_shape,
            expected_num_trainable_weights=(
                1 if options["capsule_dim"] == 1 else 3),
            expected_num_non_trainable_weights=0,
            expected_num_parameters=num_parameters,
            run_training_check=full,
            run_mixed_precision_check=full,
            run_saving_check=full,
        )

    @parameterized.named_parameters(
        ("concurrent", "concurrent", True),
        ("sequential", "sequential", False))
    def test_stack_layer(self, schedule, full):
        layers = _three_layer_stack().layers
        self.run_layer_test(
            InvertedAttentionRoutingStack,
            {"layers": _serialized(*layers), "num_iterations": 2,
             "schedule": schedule},
            input_shape=(2, 7, 6, 2, 4),
            expected_output_shape=(2, 3, 4),
            expected_num_trainable_weights=9,
            expected_num_non_trainable_weights=0,
            expected_num_parameters=(3 * 3 * 2 * 4 * 3 + 8)
            + (2 * 2 * 3 * 4 * 2 + 8) + (2 * 1 * 2 * 4 * 3 + 8),
            run_training_check=full,
            run_mixed_precision_check=full,
        )

    @parameterized.named_parameters(
        ("matrix_one_iteration", "matrix", 1),
        ("matrix_two_iterations", "matrix", 2),
        ("matrix_three_iterations", "matrix", 3),
        ("vector_three_iterations", "vector", 3),
    )
    def test_fc_matches_numpy_reference(self, pose, num_iterations):
        rng = np.random.default_rng(num_iterations)
        children = rng.normal(size=(3, 5, 4)).astype("float32")
        capsule_dim = 4 if pose == "matrix" else 3
        layer = InvertedAttentionRouting(
            3, capsule_dim, pose=pose, num_iterations=num_iterations)
        layer.build(children.shape)
        ref = _hand_set(layer, rng)
        expected, expected_couplings = ref.route(children.astype("float64"),
                                                 num_iterations)
        outputs, couplings = layer(children, return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        # (batch, parents, children), as DynamicRouting.
        self.assertAllClose(couplings,
                            expected_couplings[:, 0].transpose(0, 2, 1),
                            atol=1e-5, rtol=1e-4)

    @parameterized.named_parameters(
        ("matrix_strides_1", "matrix", 1, 2),
        ("matrix_strides_2", "matrix", 2, 2),
        ("vector_strides_1", "vector", 1, 3),
        ("vector_strides_2", "vector", 2, 2),
    )
    def test_conv_matches_loop_reference(self, pose, strides, num_iterations):
        # A non-square map and distinct values everywhere: a windowing that
        # mixed positions, types or pose entries would not match.
        rng = np.random.default_rng(10 * strides + num_iterations)
        poses = rng.normal(size=(2, 7, 6, 3, 4)).astype("float32")
        capsule_dim = 4 if pose == "matrix" else 2
        layer = InvertedAttentionRouting(
            2, capsule_dim, kernel_size=3, strides=strides, pose=pose,
            num_iterations=num_iterations)
        layer.build(poses.shape)
        ref = _hand_set(layer, rng)
        expected, expected_couplings = ref.route(poses.astype("float64"),
                                                 num_iterations)
        outputs, couplings = layer(poses, return_couplings=True)
        out_h, out_w = (7 - 3) // strides + 1, (6 - 3) // strides + 1
        self.assertEqual(tuple(outputs.shape),
                         (2, out_h, out_w, 2, capsule_dim))
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        # Reference couplings (B, X, (p, q, n), M) -> (B, h', w', M, p, q, n).
        expected_couplings = expected_couplings.reshape(
            2, out_h, out_w, 3, 3, 3, 2).transpose(0, 1, 2, 6, 3, 4, 5)
        self.assertAllClose(couplings, expected_couplings, atol=1e-5,
                            rtol=1e-4)

    def test_one_step_with_given_parents(self):
        rng = np.random.default_rng(7)
        poses = rng.normal(size=(2, 5, 5, 2, 4)).astype("float32")
        parents = rng.normal(size=(2, 2, 2, 3, 4)).astype("float32")
        layer = InvertedAttentionRouting(3, 4, kernel_size=2, strides=2,
                                         num_iterations=3)
        layer.build(poses.shape)
        ref = _hand_set(layer, rng)
        expected, _ = ref.step(poses.astype("float64"),
                               parents.astype("float64"))
        self.assertAllClose(layer(poses, parents=parents), expected,
                            atol=1e-4, rtol=1e-4)

    @parameterized.named_parameters(
        ("fully_connected", {}, (2, 6, 4)),
        ("convolutional", {"kernel_size": 2, "strides": 2},
         (2, 5, 5, 2, 4)),
    )
    def test_public_routing_steps_match_numpy_reference(self, kwargs,
                                                        input_shape):
        rng = np.random.default_rng(11)
        poses = rng.normal(size=input_shape).astype("float32")
        layer = InvertedAttentionRouting(3, 4, **kwargs)
        layer.build(poses.shape)
        ref = _hand_set(layer, rng)
        votes = layer.votes(poses)
        first = layer.route(votes)
        expected_first, _ = ref.step(poses.astype("float64"), None)
        self.assertAllClose(first, expected_first, atol=1e-4, rtol=1e-4)
        # Same votes, a second pass against the first pass's parents.
        second = layer.route(votes, first)
        expected_second, _ = ref.step(poses.astype("float64"),
                                      _numpy(first).astype("float64"))
        self.assertAllClose(second, expected_second, atol=1e-4, rtol=1e-4)
        with self.assertRaisesRegex(
                ValueError, "already built for inputs of shape .*Received: "
                "input_shape="):
            layer.votes(poses[:, 1:])
        with self.assertRaisesRegex(ValueError, "expects `parents`"):
            layer.route(votes, first[..., 1:, :])

    def test_routing_changes_outputs(self):
        # Guards the reference tests: each pass moves the outputs, and the
        # two schedules differ.
        rng = np.random.default_rng(3)
        poses = rng.normal(size=(2, 7, 6, 2, 4))
        stack = _three_layer_stack()
        stack.build(poses.shape)
        layers = [_hand_set(layer, rng) for layer in stack.layers]
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
        stack = _three_layer_stack(pose, num_iterations=num_iterations,
                                   schedule=schedule)
        stack.build(poses.shape)
        layers = [_hand_set(layer, rng) for layer in stack.layers]
        procedure = (reference.concurrent_routing if schedule == "concurrent"
                     else reference.sequential_routing)
        expected = procedure(poses.astype("float64"), layers, num_iterations)
        self.assertAllClose(stack(poses), expected, atol=1e-4, rtol=1e-4)

    def test_stack_of_one_layer_equals_the_layer(self):
        poses = np.random.default_rng(4).normal(size=(2, 5, 4)).astype(
            "float32")
        layer = InvertedAttentionRouting(3, 4, num_iterations=3)
        expected = layer(poses)
        for schedule in ("concurrent", "sequential"):
            stack = InvertedAttentionRoutingStack(
                _serialized(layer), num_iterations=3, schedule=schedule)
            stack.build(poses.shape)
            stack.set_weights(layer.get_weights())
            self.assertAllClose(stack(poses), expected, atol=1e-6)

    def test_couplings_sum_to_one_over_parents(self):
        rng = np.random.default_rng(1)
        fc = InvertedAttentionRouting(5, 4, num_iterations=3,
                                      kernel_initializer="random_normal")
        _, couplings = fc(rng.normal(size=(4, 7, 4)).astype("float32"),
                          return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (4, 5, 7))
        self.assertAllClose(_numpy(keras.ops.sum(couplings, axis=1)),
                            np.ones((4, 7)), atol=1e-6)
        self.assertGreater(float(np.std(_numpy(couplings))), 1e-3)
        conv = InvertedAttentionRouting(3, 4, kernel_size=2, strides=1)
        _, couplings = conv(rng.normal(size=(2, 4, 3, 2, 4)).astype(
            "float32"), return_couplings=True)
        self.assertEqual(tuple(couplings.shape), (2, 3, 2, 3, 2, 2, 2))
        self.assertAllClose(_numpy(keras.ops.sum(couplings, axis=3)),
                            np.ones((2, 3, 2, 2, 2, 2)), atol=1e-6)

    def test_first_pass_is_uniform(self):
        layer = InvertedAttentionRouting(4, 4, kernel_size=2,
                                         num_iterations=1)
        _, couplings = layer(np.ones((2, 3, 3, 2, 4), dtype="float32"),
                             return_couplings=True)
        self.assertAllClose(couplings, np.full((2, 2, 2, 4, 2, 2, 2), 0.25))

    def test_layer_norm_as_specified(self):
        # LayerNorm over the flattened pose with the spec's epsilon 1e-5 and
        # learned gain and bias, after a plain (not renormalised) weighted
        # sum and with no squash. Tiny votes make epsilon matter: the
        # default Keras epsilon 1e-3 would give a visibly different result.
        rng = np.random.default_rng(2)
        children = rng.normal(size=(2, 6, 9)).astype("float32")
        layer = InvertedAttentionRouting(2, 9, num_iterations=1)
        layer.build(children.shape)
        kernel = (rng.normal(size=(6, 3, 3, 2)) * 1e-3).astype("float32")
        layer.kernel.assign(kernel)
        gamma = rng.uniform(0.5, 2.0, size=9).astype("float32")
        beta = rng.normal(size=9).astype("float32")
        layer.layer_norm.gamma.assign(gamma)
        layer.layer_norm.beta.assign(beta)
        self.assertEqual(layer.layer_norm.epsilon, 1e-5)
        votes = reference.fc_votes(children.astype("float64"),
                                   kernel.astype("float64"), "matrix")
        weighted = votes[:, 0].sum(axis=1) / 2  # uniform couplings 1/2
        expected = reference.layer_norm(weighted, gamma, beta, 1e-5)
        outputs = _numpy(layer(children))
        self.assertAllClose(outputs, expected, atol=1e-3, rtol=1e-3)
        loose = reference.layer_norm(weighted, gamma, beta, 1e-3)
        self.assertGreater(np.max(np.abs(loose - expected)), 0.1)
        # Unit gain and zero bias: zero mean, unit variance per pose.
        layer.layer_norm.gamma.assign(np.ones(9, "float32"))
        layer.layer_norm.beta.assign(np.zeros(9, "float32"))
        layer.kernel.assign(kernel * 1e3)
        outputs = _numpy(layer(children))
        self.assertAllClose(outputs.mean(-1), np.zeros((2, 2)), atol=1e-5)
        self.assertAllClose(outputs.var(-1), np.ones((2, 2)), atol=1e-3)
        # capsule_dim 1: no LayerNorm, the plain weighted sum.
        layer = InvertedAttentionRouting(2, 1, pose="vector",
                                         num_iterations=1)
        layer.build(children.shape)
        self.assertIsNone(layer.layer_norm)
        kernel = rng.normal(size=(6, 9, 2, 1)).astype("float32")
        layer.kernel.assign(kernel)
        expected = reference.fc_votes(
            children.astype("float64"), kernel.astype("float64"),
            "vector")[:, 0].sum(axis=1) / 2
        self.assertAllClose(layer(children), expected, atol=1e-4, rtol=1e-4)

    def test_default_initializer_scale(self):
        # routing.md §2.5: N(0, 1) * sqrt(M / (s * N * k^2)) for matrix
        # poses, sqrt(M / (d_in * N * k^2)) for vector poses.
        cases = (
            (InvertedAttentionRouting(32, 16, kernel_size=3, strides=2),
             (None, 16, 16, 32, 16), np.sqrt(32 / (4 * 32 * 9))),
            (InvertedAttentionRouting(10, 16), (None, 800, 16),
             np.sqrt(10 / (4 * 800))),
            (InvertedAttentionRouting(10, 8, pose="vector"), (None, 200, 4),
             np.sqrt(10 / (4 * 200))),
        )
        for layer, shape, stddev in cases:
            layer.build(shape)
            kernel = _numpy(layer.kernel)
            self.assertAllClose(kernel.std(), stddev, rtol=0.05)
            self.assertAllClose(_numpy(layer.layer_norm.gamma), 1.0)
            self.assertAllClose(_numpy(layer.layer_norm.beta), 0.0)

    def test_batch_size_one_in_a_functional_model(self):
        inputs = keras.Input((7, 6, 2, 4))
        outputs = _three_layer_stack(num_iterations=2)(inputs)
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
        stack = _three_layer_stack(num_iterations=3)
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
        # routing.md §2.6; the ResNet backbone is the application's. The
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
            self.assertEqual(stack.count_params(), routing_params)
            self.assertEqual(stack.compute_output_shape(
                (None, 16, 16, 32, pose_dim)),
                (None, fc_layers[-1][0], pose_dim))
            self.assertEqual(tuple(stack.layers[0].kernel.shape),
                             (3, 3, 32, *(2 * [int(pose_dim ** 0.5)]), 32))
        # The whole models' totals (1,828,817 / 2,799,629) are pinned on
        # the built application in
        # tests/applications/inverted_attention_capsnet_test.py.

    def test_stack_config_round_trip_keeps_children(self):
        stack = _three_layer_stack("vector", num_iterations=3,
                                   schedule="sequential")
        revived = InvertedAttentionRoutingStack.from_config(
            stack.get_config())
        self.assertLen(revived.layers, 3)
        for original, copy in zip(stack.layers, revived.layers):
            self.assertEqual(copy.get_config(), original.get_config())
        self.assertEqual(revived.schedule, "sequential")
        self.assertEqual(revived.num_iterations, 3)

    @parameterized.named_parameters(
        ("zero_capsules", {"num_capsules": 0}, ValueError, "num_capsules"),
        ("string_dim", {"capsule_dim": "16"}, TypeError, "capsule_dim"),
        ("not_a_square", {"capsule_dim": 8}, ValueError, "capsule_dim"),
        ("bad_pose", {"pose": "tensor"}, ValueError, "pose"),
        ("zero_kernel", {"kernel_size": 0}, ValueError, "kernel_size"),
        ("three_kernel_sizes", {"kernel_size": (3, 3, 3)}, ValueError,
         "kernel_size"),
        ("fc_strides", {"strides": 2}, ValueError, "strides"),
        ("zero_iterations", {"num_iterations": 0}, ValueError,
         "num_iterations"),
        ("dropout_one", {"dropout": 1.0}, ValueError, "dropout"),
        ("negative_epsilon", {"epsilon": -1e-5}, ValueError, "epsilon"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            InvertedAttentionRouting(**kwargs)

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

    def test_bad_input_shapes(self):
        fc = InvertedAttentionRouting(3, 4)
        with self.assertRaisesRegex(ValueError, "fully connected.*Received: "
                                    "input_shape=\\(None, 16\\)"):
            fc.compute_output_shape((None, 16))
        with self.assertRaisesRegex(ValueError, "fully connected"):
            fc(keras.KerasTensor((None, 3, 4, 4)))
        conv = InvertedAttentionRouting(3, 4, kernel_size=3)
        with self.assertRaisesRegex(ValueError, "5-D capsule map.*Received: "
                                    "input_shape=\\(None, 8, 4\\)"):
            conv(keras.KerasTensor((None, 8, 4)))
        with self.assertRaisesRegex(ValueError, "larger than its 2x5 capsule "
                                    "map.*Received: input_shape="
                                    "\\(None, 2, 5, 3, 4\\)"):
            conv(keras.KerasTensor((None, 2, 5, 3, 4)))
        with self.assertRaisesRegex(ValueError, "same size as its own, "
                                    "capsule_dim=4 \\(2x2\\).*Received: "
                                    "input_shape=\\(None, 5, 9\\)"):
            fc.build((None, 5, 9))
        with self.assertRaisesRegex(ValueError, "known"):
            conv.build((None, None, 5, 3, 4))
        # Built for one shape, called with another.
        fc(keras.KerasTensor((None, 5, 4)))
        with self.assertRaisesRegex(ValueError, "axis 1 .* value 5, but "
                                    "received .* shape \\(2, 6, 4\\)"):
            fc(np.zeros((2, 6, 4), "float32"))
        with self.assertRaisesRegex(ValueError, "`parents` of its output "
                                    "shape \\(batch, 3, 4\\).*Received: "
                                    "parents.shape=\\(2, 4, 4\\)"):
            fc(np.zeros((2, 5, 4), "float32"),
               parents=np.zeros((2, 4, 4), "float32"))

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
        outputs = _three_layer_stack(num_iterations=3)(inputs)
        model = keras.Model(inputs, outputs)
        path = os.path.join(self.get_temp_dir(), "exported")
        model.export(path, format="tf_saved_model", verbose=False)
        loaded = tf.saved_model.load(path)
        rng = np.random.default_rng(8)
        for batch in (1, 3):
            x = rng.normal(size=(batch, 7, 6, 2, 4)).astype("float32")
            self.assertAllClose(loaded.serve(x), model(x), atol=1e-5,
                                rtol=1e-5)

    @parameterized.named_parameters(
        ("fully_connected", {}, (2, 6, 4)),
        ("convolutional", {"kernel_size": 2}, (2, 3, 3, 2, 4)),
    )
    def test_regularizers_and_constraints(self, kwargs, input_shape):
        check_regularizers_and_constraints(
            self, InvertedAttentionRouting,
            {"num_capsules": 3, "capsule_dim": 4, **kwargs},
            np.random.default_rng(2).normal(size=input_shape),
            {"kernel": ["kernel"]})

    def test_stack_collects_its_layers_regularization_losses(self):
        stack = InvertedAttentionRoutingStack([
            InvertedAttentionRouting(
                3, 4, kernel_size=2,
                kernel_regularizer=keras.regularizers.L2(0.01)),
            InvertedAttentionRouting(
                2, 4, kernel_regularizer=keras.regularizers.L1(0.03)),
        ])
        stack(np.random.default_rng(3).normal(size=(2, 3, 3, 2, 4)))
        bottom, top = (_numpy(layer.kernel).astype("float64")
                       for layer in stack.layers)
        self.assertAllClose(
            sorted(float(_numpy(loss)) for loss in stack.losses),
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
