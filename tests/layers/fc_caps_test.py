import keras
import numpy as np
from absl.testing import parameterized

from keras_caps.layers import FCCaps
from keras_caps.testing import TestCase
from keras_caps.testing import value_and_gradients
from tests.layers import reference
from tests.layers.weight_options import check_regularizers_and_constraints


def _num_trainable(layer):
    """Trainable scalars: the pinned paper counts (no routing temperature)."""
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


class FCCapsTest(TestCase):
    def test_layer(self):
        self.run_layer_test(
            FCCaps,
            {"num_capsules": 3, "capsule_dim": 5},
            input_shape=(2, 6, 4),
            expected_output_shape=(2, 3, 5),
            expected_num_trainable_weights=2,
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=3 * 6 * 4 * 5 + 3 * 6,
        )

    def test_official_parameter_counts(self):
        mnist = FCCaps(10, 16)
        mnist.build((None, 16, 8))
        self.assertEqual(_num_trainable(mnist), 20_640)
        self.assertEqual(tuple(mnist.kernel.shape), (10, 16, 8, 16))
        self.assertEqual(tuple(mnist.prior.shape), (10, 16, 1))
        smallnorb = FCCaps(5, 16)
        smallnorb.build((None, 16, 8))
        self.assertEqual(_num_trainable(smallnorb), 10_320)

    @parameterized.named_parameters(
        ("official_divisor", "output_dim", 5),
        ("paper_divisor", "input_dim", 4),
    )
    def test_matches_numpy_reference(self, agreement_scale, scale_dim):
        rng = np.random.default_rng(0)
        u = rng.normal(size=(3, 6, 4)).astype("float32")
        layer = FCCaps(3, 5, agreement_scale=agreement_scale)
        layer.build(u.shape)
        kernel = rng.normal(size=(3, 6, 4, 5)).astype("float32") * 0.5
        prior = rng.normal(size=(3, 6, 1)).astype("float32") * 0.1
        layer.kernel.assign(kernel)
        layer.prior.assign(prior)
        expected, expected_couplings = reference.fc_caps(
            u.astype("float64"), kernel, prior, scale_dim)
        outputs, couplings = layer(u, return_couplings=True)
        self.assertAllClose(outputs, expected, atol=1e-5, rtol=1e-4)
        # Reference (batch, parents, children) -> the Router layout
        # (batch, 1, children, parents).
        self.assertAllClose(couplings,
                            expected_couplings.transpose(0, 2, 1)[:, None],
                            atol=1e-5, rtol=1e-4)

    def test_couplings_sum_to_one_over_outputs(self):
        u = np.random.default_rng(1).normal(size=(4, 7, 3)).astype("float32")
        layer = FCCaps(5, 2, prior_initializer="random_normal")
        _, couplings = layer(u, return_couplings=True)
        # (batch, heads, children, parents), normalised over the parents.
        self.assertEqual(layer.normalization_axis, "parents")
        self.assertEqual(tuple(couplings.shape), (4, 1, 7, 5))
        self.assertAllClose(keras.ops.sum(couplings, axis=3),
                            np.ones((4, 1, 7)), atol=1e-6)

    def test_symbolic_couplings(self):
        inputs = keras.Input((7, 3))
        outputs, couplings = FCCaps(5, 2)(inputs, return_couplings=True)
        self.assertEqual(tuple(outputs.shape), (None, 5, 2))
        self.assertEqual(tuple(couplings.shape), (None, 1, 7, 5))

    def test_default_initializer_matches_official_layout(self):
        # Keras treats the 4-D kernel like a conv kernel: fan_in is
        # D_in * N_out * N_in = 8 * 10 * 16, as the official kernel layout.
        layer = FCCaps(10, 16)
        layer.build((None, 16, 8))
        kernel = keras.ops.convert_to_numpy(layer.kernel)
        self.assertAllClose(np.std(kernel), np.sqrt(2.0 / 1280), rtol=0.1)
        self.assertAllClose(keras.ops.convert_to_numpy(layer.prior), 0.0)

    @parameterized.named_parameters(
        ("zero_capsules", {"num_capsules": 0}, ValueError, "num_capsules"),
        ("string_dim", {"capsule_dim": "16"}, TypeError, "capsule_dim"),
        ("scale_name", {"agreement_scale": "sqrt"}, ValueError,
         "agreement_scale"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            FCCaps(**kwargs)

    def test_bad_input_shapes(self):
        layer = FCCaps(3, 4)
        with self.assertRaisesRegex(ValueError, "ndim=3"):
            layer(keras.KerasTensor((None, 16)))
        layer(keras.KerasTensor((None, 16, 8)))
        with self.assertRaisesRegex(ValueError, "axis -1.*value 8.*\\b6\\b"):
            layer(np.zeros((2, 16, 6), dtype="float32"))

    def test_huge_inputs_stay_finite_under_mixed_precision(self):
        # Agreements of votes of ~1e4 overflow float16 unless computed in
        # float32.
        inputs = np.full((2, 16, 8), 1e4, dtype="float32")
        for policy in ("mixed_float16", "mixed_bfloat16"):
            layer = FCCaps(10, 16, dtype=policy)
            outputs, gradients = value_and_gradients(layer, inputs)
            self.assertAllFinite(outputs, policy)
            self.assertAllFinite(gradients, policy)

    def test_build_checks_the_rank(self):
        with self.assertRaisesRegex(ValueError, "3-D input.*\\(None, 16\\)"):
            FCCaps(3, 4).build((None, 16))

    def test_regularizers_and_constraints(self):
        check_regularizers_and_constraints(
            self, FCCaps, {"num_capsules": 3, "capsule_dim": 4},
            np.random.default_rng(2).normal(size=(2, 5, 3)),
            {"kernel": ["kernel"], "prior": ["prior"]})
