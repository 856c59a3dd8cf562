"""`SelfRouting` against a NumPy reference of Hahn et al. (2019), §3."""

import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import SelfRouting
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import self_routing_reference as reference

LENGTH_EPSILON = 1e-7


def capsules(rng, shape, off=()):
    """Children `(..., d + 1)`: normal poses, activations in (0.05, 1)."""
    poses = rng.normal(size=shape[:-1] + (shape[-1] - 1,))
    activations = rng.uniform(0.05, 1.0, size=shape[:-1])
    for index in off:
        activations[index] = 0.0
    return np.concatenate([poses, activations[..., None]],
                          axis=-1).astype("float32")


def hand_set(layer, rng):
    """Random normal weights (the routing ones are zero at first)."""
    values = {}
    for weight in (layer.pose_kernel, layer.route_kernel, layer.route_bias):
        value = rng.normal(scale=0.7, size=weight.shape)
        weight.assign(value.astype("float32"))
        values[weight.name] = value
    return values["pose_kernel"], values["route_kernel"], values["route_bias"]


def numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype="float64")


def expected_batch(children, weights, temperature=1.0, vectors=False):
    """The reference over a batch: `(outputs, couplings, logits)`."""
    outputs, couplings, logits = [], [], []
    for example in children.astype("float64"):
        example = example.reshape(-1, example.shape[-1])
        if vectors:
            poses = example
            activations = np.sqrt((example ** 2).sum(-1) + LENGTH_EPSILON)
        else:
            poses, activations = example[:, :-1], example[:, -1]
        pose, activation, coupling, logit = reference.route(
            poses, activations, *weights, temperature=temperature)
        if vectors:
            length = np.sqrt((pose ** 2).sum(-1, keepdims=True)
                             + LENGTH_EPSILON)
            outputs.append(activation[:, None] * pose / length)
        else:
            outputs.append(np.concatenate([pose, activation[:, None]], -1))
        couplings.append(coupling[None])
        logits.append(logit[None])
    return np.stack(outputs), np.stack(couplings), np.stack(logits)


class SelfRoutingTest(TestCase):
    @parameterized.named_parameters(
        ("capsules", {}, (3, 5, 4), (3, 3, 3),
         5 * 3 * 3 * 2 + 5 * 3 * 3 + 5 * 3, True),
        ("vectors_on_a_map",
         {"input_format": "vectors", "output_format": "vectors"},
         (2, 2, 2, 2, 3), (2, 3, 2), 8 * 3 * 3 * 2 + 8 * 3 * 3 + 8 * 3,
         False),
    )
    def test_layer(self, options, input_shape, output_shape, num_parameters,
                   full):
        rng = np.random.default_rng(0)
        if options.get("input_format") == "vectors":
            data = rng.normal(size=input_shape).astype("float32")
        else:
            data = capsules(rng, input_shape)
        self.run_layer_test(
            SelfRouting, {"num_capsules": 3, "capsule_dim": 2, **options},
            input_data=data, expected_output_shape=output_shape,
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=num_parameters,
            run_training_check=full, run_saving_check=full,
            run_mixed_precision_check=full)

    def test_capsnet_sizes_parameter_count(self):
        layer = SelfRouting(10, 16)
        layer.build((None, 1152, 9))
        # W_pose 1152 * 8 * 10 * 16, W_route 1152 * 8 * 10, b 1152 * 10.
        self.assertEqual(
            sum(int(np.prod(w.shape)) for w in layer.trainable_weights),
            1_474_560 + 92_160 + 11_520)

    @parameterized.named_parameters(
        ("capsules", "capsules", (3, 5, 4), 1.0),
        ("capsules_tempered", "capsules", (2, 4, 3), 0.6),
        ("vectors_map", "vectors", (2, 2, 1, 2, 3), 1.0),
    )
    def test_matches_numpy_reference(self, input_format, shape, temperature):
        rng = np.random.default_rng(len(shape))
        if input_format == "vectors":
            children = rng.normal(size=shape).astype("float32")
        else:
            children = capsules(rng, shape)
        layer = SelfRouting(3, 2, input_format=input_format,
                            output_format=input_format,
                            temperature=temperature)
        layer.build(children.shape)
        weights = hand_set(layer, rng)
        expected, couplings, logits = expected_batch(
            children, weights, temperature, vectors=input_format == "vectors")
        outputs, called = layer(children, return_couplings=True)
        self.assertAllClose(numpy(outputs), expected, atol=1e-5, rtol=1e-4)
        self.assertAllClose(numpy(called), couplings, atol=1e-6)
        trace = layer.routing_trace(children)
        self.assertLen(trace["couplings"], 1)
        self.assertAllClose(numpy(trace["agreement"][0]), logits,
                            atol=1e-5, rtol=1e-5)
        # Votes v_j|i = W_pose_ij u_i, (batch, children, parents, z).
        poses = children.reshape(len(children), -1, shape[-1])
        if input_format == "capsules":
            poses = poses[..., :-1]
        votes = np.einsum("bid,idjz->bijz", poses, weights[0])
        self.assertAllClose(numpy(trace["votes"]), votes, atol=1e-5,
                            rtol=1e-5)

    def test_a_child_that_is_off_changes_nothing(self):
        rng = np.random.default_rng(7)
        children = capsules(rng, (2, 5, 4), off=[(0, 1), (1, 4)])
        layer = SelfRouting(3, 2)
        layer.build(children.shape)
        weights = hand_set(layer, rng)
        outputs = numpy(layer(children))
        for example, dropped in ((0, 1), (1, 4)):
            keep = [i for i in range(5) if i != dropped]
            expected, _, _ = expected_batch(
                children[example:example + 1, keep],
                [w[keep] for w in weights])
            self.assertAllClose(outputs[example], expected[0], atol=1e-5,
                                rtol=1e-4)

    # `run_layer_test` also checks all-zero inputs under both mixed
    # precisions; this checks the values the documentation promises.
    @parameterized.named_parameters(
        ("float32", "float32"), ("mixed_float16", "mixed_float16"))
    def test_all_children_off_give_parents_off(self, policy):
        rng = np.random.default_rng(3)
        children = capsules(rng, (2, 5, 4))
        children[..., -1] = 0.0
        layer = SelfRouting(3, 2, dtype=policy)
        layer.build(children.shape)
        hand_set(layer, rng)
        outputs, gradients = value_and_gradients(layer, children)
        outputs = numpy(outputs)
        # Documented: parent activation 0 and parent pose 0.
        self.assertAllClose(outputs, np.zeros_like(outputs))
        self.assertAllFinite(gradients, f"gradients under {policy}")
        vectors = SelfRouting(3, 2, output_format="vectors", dtype=policy)
        outputs, gradients = value_and_gradients(vectors, children)
        self.assertAllClose(numpy(outputs), np.zeros((2, 3, 2)))
        self.assertAllFinite(gradients, f"vector gradients under {policy}")

    def test_gradients_match_finite_differences(self):
        rng = np.random.default_rng(11)
        children = capsules(rng, (1, 4, 3))
        layer = SelfRouting(2, 2)
        layer.build(children.shape)
        weights = hand_set(layer, rng)
        _, gradients = value_and_gradients(layer, children)
        # d(sum of outputs) / d(route_kernel), the third gradient.

        def total(route_kernel):
            outputs, _, _ = expected_batch(
                children, (weights[0], route_kernel, weights[2]))
            return outputs.sum()

        numeric = np.zeros_like(weights[1])
        step = 1e-6
        for index in np.ndindex(*weights[1].shape):
            shift = np.zeros_like(weights[1])
            shift[index] = step
            numeric[index] = (total(weights[1] + shift)
                              - total(weights[1] - shift)) / (2 * step)
        self.assertAllClose(gradients[2], numeric, atol=2e-4, rtol=1e-3)

    def test_bad_arguments_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "num_capsules"):
            SelfRouting(0, 4)
        with self.assertRaisesRegex(ValueError, "capsule_dim"):
            SelfRouting(3, -1)
        with self.assertRaisesRegex(ValueError, "input_format"):
            SelfRouting(3, 4, input_format="matrix")
        with self.assertRaisesRegex(ValueError, "output_format"):
            SelfRouting(3, 4, output_format="poses")
        with self.assertRaisesRegex(ValueError, "temperature"):
            SelfRouting(3, 4, temperature=0.0)

    def test_bad_inputs_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "last axis of `inputs`"):
            SelfRouting(3, 4)(np.ones((2, 5, 1)))
        with self.assertRaisesRegex(ValueError, "`inputs`"):
            SelfRouting(3, 4)(np.ones((2, 5, 2, 3)))
        layer = SelfRouting(3, 4)
        layer(np.ones((2, 5, 3)))
        with self.assertRaisesRegex(ValueError, "built for"):
            layer.compute_output_shape((2, 6, 3))
