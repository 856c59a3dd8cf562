import keras
import numpy as np
from absl.testing import parameterized
from keras import ops

from keras_caps import ops as capsule_ops
from keras_caps.ops import fully_connected_em_routing as em_routing
from keras_caps.testing import TestCase
from keras_caps.testing import function_gradients
from tests.layers import em_routing_reference as reference


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float64")


def _problem(seed, batch=2, children=5, parents=3, pose_size=16):
    rng = np.random.default_rng(seed)
    votes = rng.normal(size=(batch, children, parents, pose_size)) * 0.6
    activations = rng.uniform(0.1, 1.0, size=(batch, children))
    beta_u = rng.normal(size=parents) * 0.3
    beta_a = rng.normal(size=parents) * 0.3
    return (votes.astype("float32"), activations.astype("float32"),
            beta_u.astype("float32"), beta_a.astype("float32"))


class EMStepsTest(TestCase):
    @parameterized.named_parameters(("plain", 1.0), ("rescaled", 0.25))
    def test_m_step_matches_reference(self, data_scale):
        votes, _, beta_u, beta_a = _problem(0)
        weights = np.random.default_rng(1).uniform(
            size=votes.shape[:3]).astype("float32")
        means, variances, activations = capsule_ops.em_m_step(
            votes, weights, beta_u, beta_a, 0.7, epsilon=1e-3,
            data_scale=data_scale)
        for b in range(votes.shape[0]):
            expected = reference.m_step(
                votes[b].astype("float64"), weights[b], beta_u, beta_a, 0.7,
                1e-3, data_scale)
            for actual, wanted in zip((means, variances, activations),
                                      expected):
                self.assertAllClose(_numpy(actual)[b], wanted, atol=2e-5,
                                    rtol=2e-5)
        self.assertEqual(keras.backend.standardize_dtype(means.dtype),
                         "float32")

    def test_log_likelihood_is_the_log_density(self):
        votes, _, _, _ = _problem(2, pose_size=4)
        rng = np.random.default_rng(3)
        means = rng.normal(size=(2, 3, 4)) * 0.5
        variances = rng.uniform(0.2, 1.5, size=(2, 3, 4))
        log_p = _numpy(capsule_ops.em_log_likelihood(votes, means,
                                                     variances))
        self.assertEqual(log_p.shape, (2, 5, 3))
        for b in range(2):
            self.assertAllClose(
                log_p[b], np.log(reference.gaussian_density(
                    votes[b].astype("float64"), means[b], variances[b])),
                atol=1e-4, rtol=1e-5)

    def test_far_votes_give_finite_very_negative_log_likelihood(self):
        votes = np.full((1, 2, 1, 16), 1e3, "float32")
        log_p = _numpy(capsule_ops.em_log_likelihood(
            votes, np.zeros((1, 16)), np.full((1, 16), 1e-4)))
        self.assertAllFinite(log_p)
        self.assertLess(log_p.max(), -1e9)


class EMRoutingTest(TestCase):
    @parameterized.named_parameters(
        ("one_iteration", (1.0,), 1.0),
        ("three_iterations", (0.3, 0.6, 1.0), 1.0),
        ("three_iterations_tempered", (0.5, 0.5, 2.0), 0.5),
    )
    def test_matches_procedure_1(self, schedule, temperature):
        votes, activations, beta_u, beta_a = _problem(4)
        result = em_routing(
            votes, activations, beta_u, beta_a, schedule, epsilon=1e-3,
            keep_passes=True, temperature=temperature)
        for key in result:
            self.assertLen(result[key], len(schedule))
        for b in range(votes.shape[0]):
            passes = reference.em_routing(
                votes[b].astype("float64"), activations[b], beta_u, beta_a,
                schedule, 1e-3, temperature=temperature)
            for t, expected in enumerate(passes):
                for key, wanted in expected.items():
                    self.assertAllClose(_numpy(result[key][t])[b], wanted,
                                        atol=5e-5, rtol=5e-5,
                                        msg=f"{key}, iteration {t}")
        # The couplings are the tempered softmax of the E-step logits.
        for couplings, logits in zip(result["couplings"], result["logits"]):
            shifted = _numpy(logits) / temperature
            shifted = np.exp(shifted - shifted.max(-1, keepdims=True))
            self.assertAllClose(_numpy(couplings),
                                shifted / shifted.sum(-1, keepdims=True),
                                atol=1e-6)
        self.assertAllClose(_numpy(result["logits"][0]), 0.0)

    def test_only_the_last_pass_by_default(self):
        votes, activations, beta_u, beta_a = _problem(5)
        last = em_routing(votes, activations, beta_u, beta_a,
                                      (0.5, 1.0))
        every = em_routing(votes, activations, beta_u, beta_a,
                                       (0.5, 1.0), keep_passes=True)
        for key in last:
            self.assertLen(last[key], 1)
            self.assertAllClose(last[key][0], every[key][-1])

    def test_an_inactive_child_changes_nothing_and_stays_finite(self):
        votes, activations, beta_u, beta_a = _problem(6)
        activations[:, 2] = 0.0
        votes[:, 2] = 50.0  # far away: it would dominate if it counted

        def route(votes, activations):
            result = em_routing(votes, activations, beta_u,
                                            beta_a, (0.5, 1.0))
            return ops.concatenate([result["means"][-1],
                                    result["activations"][-1][..., None]],
                                   -1)

        outputs, gradients = function_gradients(route, votes, activations)
        self.assertAllFinite(outputs)
        self.assertAllFinite(gradients)
        without = route(np.delete(votes, 2, axis=1),
                        np.delete(activations, 2, axis=1))
        self.assertAllClose(outputs, without, atol=1e-5, rtol=1e-5)

    def test_all_children_inactive_is_finite(self):
        votes, activations, beta_u, beta_a = _problem(7)
        activations[:] = 0.0

        def route(votes, activations):
            result = em_routing(votes, activations, beta_u,
                                            beta_a, (0.5, 1.0), epsilon=1e-4)
            return ops.concatenate([result["means"][-1],
                                    result["variances"][-1]], -1)

        outputs, gradients = function_gradients(route, votes, activations)
        self.assertAllFinite(gradients)
        outputs = _numpy(outputs)
        self.assertAllClose(outputs[..., :16], 0.0)
        self.assertAllClose(outputs[..., 16:], 1e-4, rtol=1e-5)

    @parameterized.named_parameters(("float16", "float16"),
                                    ("bfloat16", "bfloat16"))
    def test_half_precision_inputs_route_in_float32(self, dtype):
        votes, activations, beta_u, beta_a = _problem(8)
        result = em_routing(
            ops.cast(votes, dtype), ops.cast(activations, dtype), beta_u,
            beta_a, (0.5, 1.0), epsilon=1e-6, temperature=1e-3)
        for key, values in result.items():
            self.assertEqual(
                keras.backend.standardize_dtype(values[-1].dtype), "float32")
            self.assertAllFinite(values[-1], key)

    def test_inverse_temperature_schedules(self):
        self.assertEqual(capsule_ops.em_inverse_temperatures(3),
                         (1 / 3, 2 / 3, 1.0))
        self.assertEqual(capsule_ops.em_inverse_temperatures(2, 4.0),
                         (2.0, 4.0))
        self.assertEqual(capsule_ops.em_inverse_temperatures(2, [1, 1]),
                         (1.0, 1.0))
        with self.assertRaisesRegex(ValueError, "non-decreasing"):
            capsule_ops.em_inverse_temperatures(2, [2.0, 1.0])
        with self.assertRaisesRegex(ValueError, "one value per iteration"):
            capsule_ops.em_inverse_temperatures(3, [1.0, 2.0])
        with self.assertRaisesRegex(ValueError, "above 0"):
            capsule_ops.em_inverse_temperatures(2, [0.0, 1.0])
        with self.assertRaisesRegex(TypeError, "inverse_temperatures"):
            capsule_ops.em_inverse_temperatures(2, "fast")
        with self.assertRaisesRegex(ValueError, "num_iterations"):
            capsule_ops.em_inverse_temperatures(0)
        with self.assertRaisesRegex(ValueError, "at least one"):
            em_routing(*_problem(0), ())


class MatrixCapsuleTensorTest(TestCase):
    def test_split_and_join_round_trip(self):
        capsules = np.random.default_rng(0).normal(size=(2, 3, 4, 17))
        poses, activations = capsule_ops.split_matrix_capsules(capsules)
        self.assertEqual(tuple(poses.shape), (2, 3, 4, 16))
        self.assertAllClose(activations, capsules[..., 16])
        self.assertAllClose(
            capsule_ops.join_matrix_capsules(poses, activations), capsules)

    def test_wrong_sizes_are_refused(self):
        with self.assertRaisesRegex(ValueError, "`capsules`.*Received"):
            capsule_ops.split_matrix_capsules(np.zeros((2, 16)))
        with self.assertRaisesRegex(ValueError, "`poses`.*Received"):
            capsule_ops.join_matrix_capsules(np.zeros((2, 9)), np.zeros(2))
