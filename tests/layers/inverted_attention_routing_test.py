
import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import InvertedAttentionRouting
from keras_caps.testing import TestCase
from tests.layers import inverted_attention_reference as reference
from tests.layers.inverted_attention_fixtures import hand_set
from tests.layers.inverted_attention_fixtures import to_numpy
from tests.layers.weight_options import check_regularizers_and_constraints


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
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=num_parameters,
            run_training_check=full,
            run_mixed_precision_check=full,
            run_saving_check=full,
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
        ref = hand_set(layer, rng)
        expected, expected_couplings = ref.route(children.astype("float64"),
                                                 num_iterations)
        outputs, couplings = layer(children, return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        # Reference (B, X = 1, children, parents) is the Router layout
        # (batch, heads = 1, children, parents).
        self.assertEqual(tuple(couplings.shape), (3, 1, 5, 3))
        self.assertAllClose(couplings, expected_couplings,
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
        ref = hand_set(layer, rng)
        expected, expected_couplings = ref.route(poses.astype("float64"),
                                                 num_iterations)
        outputs, couplings = layer(poses, return_couplings=True)
        out_h, out_w = (7 - 3) // strides + 1, (6 - 3) // strides + 1
        self.assertEqual(tuple(outputs.shape),
                         (2, out_h, out_w, 2, capsule_dim))
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        # Reference (B, X, (p, q, n), M) -> the Router layout
        # (B, 1, (h', w', p, q, n), M), children row-major.
        expected_couplings = expected_couplings.reshape(2, 1, -1, 2)
        self.assertEqual(tuple(couplings.shape),
                         (2, 1, out_h * out_w * 3 * 3 * 3, 2))
        self.assertAllClose(couplings, expected_couplings, atol=1e-5,
                            rtol=1e-4)

    def test_one_step_with_given_parents(self):
        rng = np.random.default_rng(7)
        poses = rng.normal(size=(2, 5, 5, 2, 4)).astype("float32")
        parents = rng.normal(size=(2, 2, 2, 3, 4)).astype("float32")
        layer = InvertedAttentionRouting(3, 4, kernel_size=2, strides=2,
                                         num_iterations=3)
        layer.build(poses.shape)
        ref = hand_set(layer, rng)
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
        ref = hand_set(layer, rng)
        votes = layer.votes(poses)
        first = layer.route(votes)
        expected_first, _ = ref.step(poses.astype("float64"), None)
        self.assertAllClose(first, expected_first, atol=1e-4, rtol=1e-4)
        # Same votes, a second pass against the first pass's parents.
        second = layer.route(votes, first)
        expected_second, expected_couplings = ref.step(
            poses.astype("float64"), to_numpy(first).astype("float64"))
        self.assertAllClose(second, expected_second, atol=1e-4, rtol=1e-4)
        # A pass's couplings: reference (B, X, (p, q, n), M) -> the Router
        # layout (B, 1, (X, p, q, n), M).
        again, couplings = layer.route(votes, first, return_couplings=True)
        self.assertAllClose(again, second)
        self.assertAllClose(couplings,
                            expected_couplings.reshape(2, 1, -1, 3),
                            atol=1e-5, rtol=1e-4)
        _, uniform = layer.route(votes, return_couplings=True)
        self.assertAllClose(uniform, np.full(couplings.shape, 1 / 3))
        with self.assertRaisesRegex(
                ValueError, "already built for inputs of shape .*Received: "
                "input_shape="):
            layer.votes(poses[:, 1:])
        with self.assertRaisesRegex(ValueError, "expects `parents`"):
            layer.route(votes, first[..., 1:, :])
        with self.assertRaisesRegex(ValueError, "must be built"):
            InvertedAttentionRouting(3, 4, **kwargs).votes(poses)




    def test_couplings_sum_to_one_over_parents(self):
        rng = np.random.default_rng(1)
        fc = InvertedAttentionRouting(5, 4, num_iterations=3,
                                      kernel_initializer="random_normal")
        _, couplings = fc(rng.normal(size=(4, 7, 4)).astype("float32"),
                          return_couplings=True)
        # (batch, heads, children, parents), normalised over the parents.
        self.assertEqual(fc.normalization_axis, "parents")
        self.assertEqual(tuple(couplings.shape), (4, 1, 7, 5))
        self.assertAllClose(to_numpy(keras.ops.sum(couplings, axis=3)),
                            np.ones((4, 1, 7)), atol=1e-6)
        self.assertGreater(float(np.std(to_numpy(couplings))), 1e-3)
        conv = InvertedAttentionRouting(3, 4, kernel_size=2, strides=1)
        _, couplings = conv(rng.normal(size=(2, 4, 3, 2, 4)).astype(
            "float32"), return_couplings=True)
        # Children: 3 x 2 output positions x 2 x 2 window x 2 types.
        self.assertEqual(tuple(couplings.shape), (2, 1, 3 * 2 * 2 * 2 * 2, 3))
        self.assertAllClose(to_numpy(keras.ops.sum(couplings, axis=3)),
                            np.ones((2, 1, 48)), atol=1e-6)

    def test_first_pass_is_uniform(self):
        layer = InvertedAttentionRouting(4, 4, kernel_size=2,
                                         num_iterations=1)
        _, couplings = layer(np.ones((2, 3, 3, 2, 4), dtype="float32"),
                             return_couplings=True)
        # (batch, 1, 2 x 2 positions x 2 x 2 window x 2 types, parents)
        self.assertAllClose(couplings, np.full((2, 1, 32, 4), 0.25))

    def test_layer_norm_as_specified(self):
        # LayerNorm over the flattened pose with the official epsilon 1e-5 and
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
        outputs = to_numpy(layer(children))
        self.assertAllClose(outputs, expected, atol=1e-3, rtol=1e-3)
        loose = reference.layer_norm(weighted, gamma, beta, 1e-3)
        self.assertGreater(np.max(np.abs(loose - expected)), 0.1)
        # Unit gain and zero bias: zero mean, unit variance per pose.
        layer.layer_norm.gamma.assign(np.ones(9, "float32"))
        layer.layer_norm.beta.assign(np.zeros(9, "float32"))
        layer.kernel.assign(kernel * 1e3)
        outputs = to_numpy(layer(children))
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
        # The official initialisation (`src/layers.py`):
        # N(0, 1) * sqrt(M / (s * N * k^2)) for matrix
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
            kernel = to_numpy(layer.kernel)
            self.assertAllClose(kernel.std(), stddev, rtol=0.05)
            self.assertAllClose(to_numpy(layer.layer_norm.gamma), 1.0)
            self.assertAllClose(to_numpy(layer.layer_norm.beta), 0.0)



        # The whole models' totals (1,828,817 / 2,799,629) are pinned on
        # the built application in
        # tests/applications/inverted_attention_capsnet_test.py.


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
