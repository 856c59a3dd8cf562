import itertools
import os

import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import VectorRouting
from keras_caps.ops import compose_credit_assignments
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.layers import vector_routing_reference as reference
from tests.layers.weight_options import check_regularizers_and_constraints


def _num_trainable(layer):
    """Trainable scalars: the pinned paper counts (no routing temperature)."""
    return sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


# Paper symbol -> layer attribute.
PAPER_NAMES = {
    "W_A": "score_kernel",
    "B_A": "score_bias",
    "W_F1": "vote_scale",
    "W_F2": "vote_kernel",
    "B_F2": "vote_bias",
    "W_G1": "prediction_kernel",
    "W_G2": "prediction_scale",
    "B_G2": "prediction_bias",
    "W_S": "similarity_scale",
    "B_S": "similarity_bias",
    "beta_use": "use_benefit",
    "beta_ign": "ignore_cost",
    "beta_use_kernel": "use_benefit_kernel",
    "beta_use_bias": "use_benefit_bias",
    "beta_ign_kernel": "ignore_cost_kernel",
    "beta_ign_bias": "ignore_cost_bias",
}

BATCH, NUM_INPUTS, INPUT_DIM, NUM_OUTPUTS, OUTPUT_DIM = 3, 7, 5, 4, 6


def num_parameters(num_inputs, input_dim, num_outputs, output_dim,
                   num_iterations=2):
    """Parameter counts from the layer's weights (fixed and variable length).

    With one iteration the G and S weights (W_G1, W_G2, B_G2, W_S, B_S)
    are never used and not created.
    """
    shared = (2 * input_dim * output_dim + num_outputs * output_dim)
    if num_inputs is None:
        count = (input_dim + 1 + 5 * num_outputs * input_dim + shared
                 + 4 * num_outputs)
    else:
        count = (num_inputs * input_dim + num_inputs
                 + 3 * num_outputs * input_dim + shared
                 + 4 * num_inputs * num_outputs)
    if num_iterations == 1:
        count -= (output_dim * input_dim + 2 * num_outputs * input_dim
                  + 2 * (num_inputs or 1) * num_outputs)
    return count


def random_weights(rng, num_inputs, input_dim=INPUT_DIM,
                   num_outputs=NUM_OUTPUTS, output_dim=OUTPUT_DIM):
    """Hand-set weights, biases included, in the paper's names."""
    rows = num_inputs or 1

    def normal(*shape, scale=1.0):
        return (rng.normal(size=shape) * scale).astype("float32")

    weights = {
        "W_A": normal(rows, input_dim, scale=0.8),
        "B_A": normal(rows, scale=0.5),
        "W_F1": normal(num_outputs, input_dim),
        "W_F2": normal(input_dim, output_dim, scale=0.8),
        "B_F2": normal(num_outputs, output_dim, scale=0.3),
        "W_G1": normal(output_dim, input_dim, scale=0.4),
        "W_G2": normal(num_outputs, input_dim),
        "B_G2": normal(num_outputs, input_dim, scale=0.3),
        "W_S": normal(rows, num_outputs, scale=0.5),
        "B_S": normal(rows, num_outputs, scale=0.3),
    }
    if num_inputs is None:
        weights.update({
            "beta_use_kernel": normal(input_dim, num_outputs, scale=0.5),
            "beta_use_bias": normal(num_outputs, scale=0.5),
            "beta_ign_kernel": normal(input_dim, num_outputs, scale=0.5),
            "beta_ign_bias": normal(num_outputs, scale=0.5),
        })
    else:
        weights.update({
            "beta_use": normal(num_inputs, num_outputs),
            "beta_ign": normal(num_inputs, num_outputs),
        })
    return weights


def make_layer(weights, num_inputs, input_dim=INPUT_DIM, **kwargs):
    kwargs = {"num_capsules": NUM_OUTPUTS, "capsule_dim": OUTPUT_DIM,
              "num_inputs": num_inputs, **kwargs}
    layer = VectorRouting(**kwargs)
    layer.build((None, num_inputs, input_dim))
    for name, value in weights.items():
        if layer.num_iterations == 1 and name[-2:] in ("G1", "G2", "_S"):
            continue  # never used, so not created
        getattr(layer, PAPER_NAMES[name]).assign(value)
    return layer


def make_masks(rng, kind, batch=BATCH, num_inputs=NUM_INPUTS,
               num_outputs=NUM_OUTPUTS):
    """Returns (padding mask or None, routing mask or None)."""
    padding = routing = None
    if kind in ("padding", "both"):
        padding = np.ones((batch, num_inputs), bool)
        padding[1, -3:] = False  # trailing padding
        padding[2, 2] = False  # a hole
    if kind in ("routing", "both"):
        routing = rng.uniform(size=(num_inputs, num_outputs)) < 0.6
        routing[0] = True
        routing[2] = False  # an input that may route nowhere
        routing[3] = [True] + [False] * (num_outputs - 1)
    if kind == "batch_routing":
        routing = rng.uniform(size=(batch, num_inputs, num_outputs)) < 0.5
        routing[0, 1] = False
    return padding, routing


def reference_outputs(x, weights, num_iterations, padding, routing,
                      normalize=True, temperature=1.0):
    """`(outputs, credit phi, last shares R)` of a batch, from the reference.

    `phi` and `R` are `(batch, n, n_out)`.
    """
    outputs, credits, shares = [], [], []
    for b in range(len(x)):
        example_routing = routing
        if routing is not None and routing.ndim == 3:
            example_routing = routing[b]
        result = reference.vector_routing(
            x[b], weights, num_iterations, normalize=normalize,
            routing_mask=example_routing,
            present=None if padding is None else padding[b],
            temperature=temperature)
        outputs.append(result["x_out"])
        credits.append(result["phi"])
        shares.append(result["R"])
    return np.stack(outputs), np.stack(credits), np.stack(shares)


def mask_kwargs(padding, routing):
    kwargs = {}
    if padding is not None:
        kwargs["mask"] = padding
    if routing is not None:
        kwargs["routing_mask"] = routing
    return kwargs


REFERENCE_CASES = [
    (f"{iterations}_iterations_{length}_{masks}", iterations, length, masks)
    for iterations, length, masks in itertools.product(
        (1, 2, 3), ("fixed", "variable"),
        ("no_mask", "routing", "padding", "both", "batch_routing"))
]


class VectorRoutingTest(TestCase):
    def test_layer_fixed_length(self):
        self.run_layer_test(
            VectorRouting,
            {"num_capsules": NUM_OUTPUTS, "capsule_dim": OUTPUT_DIM,
             "num_inputs": NUM_INPUTS},
            input_shape=(BATCH, NUM_INPUTS, INPUT_DIM),
            expected_output_shape=(BATCH, NUM_OUTPUTS, OUTPUT_DIM),
            expected_num_trainable_weights=12,
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=num_parameters(
                NUM_INPUTS, INPUT_DIM, NUM_OUTPUTS, OUTPUT_DIM),
        )

    def test_layer_variable_length(self):
        self.run_layer_test(
            VectorRouting,
            {"num_capsules": NUM_OUTPUTS, "capsule_dim": OUTPUT_DIM,
             "num_iterations": 3},
            input_shape=(BATCH, NUM_INPUTS, INPUT_DIM),
            expected_output_shape=(BATCH, NUM_OUTPUTS, OUTPUT_DIM),
            expected_num_trainable_weights=14,
            expected_num_non_trainable_weights=1,  # temperature
            expected_num_parameters=num_parameters(
                None, INPUT_DIM, NUM_OUTPUTS, OUTPUT_DIM),
        )

    def test_layer_eager_mode_logits_head(self):
        # One iteration, no normalisation, one logit per output.
        self.run_layer_test(
            VectorRouting,
            {"num_capsules": 3, "capsule_dim": 1, "num_inputs": 6,
             "num_iterations": 1, "normalize": False,
             "memory_efficient": False},
            input_shape=(2, 6, 5),
            expected_output_shape=(2, 3, 1),
            expected_num_trainable_weights=7,
            expected_num_parameters=num_parameters(6, 5, 3, 1,
                                                   num_iterations=1),
            run_mixed_precision_check=False,
        )

    @parameterized.named_parameters(
        ("fixed_length", NUM_INPUTS, [
            "score_kernel", "vote_scale", "vote_kernel", "prediction_kernel",
            "prediction_scale", "similarity_scale", "use_benefit",
            "ignore_cost"], [
            "score_bias", "vote_bias", "prediction_bias",
            "similarity_bias"]),
        ("variable_length", None, [
            "score_kernel", "vote_scale", "vote_kernel", "prediction_kernel",
            "prediction_scale", "similarity_scale", "use_benefit_kernel",
            "ignore_cost_kernel"], [
            "score_bias", "vote_bias", "prediction_bias", "similarity_bias",
            "use_benefit_bias", "ignore_cost_bias"]),
    )
    def test_regularizers_and_constraints(self, num_inputs, kernels, biases):
        check_regularizers_and_constraints(
            self, VectorRouting,
            {"num_capsules": NUM_OUTPUTS, "capsule_dim": OUTPUT_DIM,
             "num_inputs": num_inputs},
            np.random.default_rng(2).normal(
                size=(BATCH, NUM_INPUTS, INPUT_DIM)),
            {"kernel": kernels, "bias": biases})

    @parameterized.named_parameters(*REFERENCE_CASES)
    def test_matches_numpy_reference(self, num_iterations, length, masks):
        rng = np.random.default_rng(num_iterations)
        num_inputs = NUM_INPUTS if length == "fixed" else None
        weights = random_weights(rng, num_inputs)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        padding, routing = make_masks(rng, masks)
        if padding is not None:
            x[~padding] = np.nan  # padding values must never leak
        expected, expected_credit, expected_shares = reference_outputs(
            x, weights, num_iterations, padding, routing)
        kwargs = mask_kwargs(padding, routing)
        results = {}
        for memory_efficient in (True, False):
            layer = make_layer(weights, num_inputs,
                               num_iterations=num_iterations,
                               memory_efficient=memory_efficient)
            outputs, couplings, credit = layer(
                x, return_couplings=True, return_credit=True, **kwargs)
            self.assertEqual(tuple(credit.shape),
                             (BATCH, NUM_INPUTS, NUM_OUTPUTS))
            self.assertEqual(tuple(couplings.shape),
                             (BATCH, 1, NUM_INPUTS, NUM_OUTPUTS))
            self.assertAllClose(outputs, expected, atol=5e-5, rtol=1e-4)
            self.assertAllClose(credit, expected_credit, atol=5e-5,
                                rtol=1e-4)
            # Reference shares (batch, inputs, outputs) -> the Router
            # layout (batch, 1, inputs, outputs).
            self.assertAllClose(couplings, expected_shares[:, None],
                                atol=5e-5, rtol=1e-4)
            results[memory_efficient] = (outputs, couplings, credit)
        # Lazy (efficient) = eager to float32 precision.
        for lazy, eager in zip(results[True], results[False], strict=True):
            self.assertAllClose(lazy, eager, atol=1e-5, rtol=1e-5)

    @parameterized.named_parameters(("normalized", True),
                                    ("raw", False))
    def test_normalize_option(self, normalize):
        rng = np.random.default_rng(3)
        weights = random_weights(rng, None)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        layer = make_layer(weights, None, normalize=normalize)
        outputs = keras.ops.convert_to_numpy(layer(x))
        expected, _, _ = reference_outputs(x, weights, 2, None, None,
                                           normalize=normalize)
        self.assertAllClose(outputs, expected, atol=5e-5, rtol=1e-4)
        if normalize:
            self.assertAllClose(outputs.mean(-1), 0.0, atol=1e-5)
        else:
            self.assertGreater(np.abs(outputs.std(-1) - 1.0).max(), 0.05)

    @parameterized.named_parameters(("1_iteration", 1), ("2_iterations", 2),
                                    ("3_iterations", 3))
    def test_bookkeeping_identity(self, num_iterations):
        # With W_A = 0 the usable share is g_i = sigmoid(B_A[i]). Setting
        # beta_use = 1 and beta_ign = 0 makes phi = D_use; beta_use = 1 and
        # beta_ign = -1 makes phi = D_use + D_ign.
        rng = np.random.default_rng(7)
        weights = random_weights(rng, NUM_INPUTS)
        weights["W_A"] = np.zeros_like(weights["W_A"])
        usable = reference.sigmoid(weights["B_A"])  # (n,)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        _, routing = make_masks(rng, "routing")
        allowed = routing.astype("float64")
        ones = np.ones((NUM_INPUTS, NUM_OUTPUTS), "float32")

        def credit(beta_use, beta_ign):
            layer = make_layer({**weights, "beta_use": beta_use,
                                "beta_ign": beta_ign}, NUM_INPUTS,
                               num_iterations=num_iterations)
            _, phi = layer(x, routing_mask=routing, return_credit=True)
            return keras.ops.convert_to_numpy(phi).astype("float64")

        used = credit(ones, 0 * ones)
        used_or_ignored = credit(ones, -ones)
        ignored = used_or_ignored - used
        unusable = 1.0 - usable[:, None] * allowed
        # D_use + D_ign + (1 - g) = 1 for every pair; all shares >= 0.
        self.assertAllClose(used + ignored + unusable,
                            np.ones_like(used), atol=1e-6)
        self.assertTrue(np.all(used >= 0.0) and np.all(ignored >= -1e-7))
        # Each input's usable data is fully used across its allowed outputs.
        has_route = routing.any(axis=1)
        self.assertAllClose(used.sum(-1)[:, has_route],
                            np.broadcast_to(usable[has_route],
                                            (BATCH, has_route.sum())),
                            atol=1e-6)
        self.assertAllClose(used[:, ~routing], 0.0)
        self.assertAllClose(ignored[:, ~routing], 0.0)
        # And the layer agrees with the reference's D_use and D_ign.
        result = reference.vector_routing(
            x[0], {**weights, "beta_use": ones, "beta_ign": 0 * ones},
            num_iterations, routing_mask=routing)
        self.assertAllClose(used[0], result["D_use"], atol=1e-5)

    def test_extra_padding_changes_nothing(self):
        rng = np.random.default_rng(11)
        weights = random_weights(rng, None)
        x = rng.normal(size=(BATCH, 5, INPUT_DIM)).astype("float32")
        layer = make_layer(weights, None)
        outputs, couplings, credit = layer(x, return_couplings=True,
                                           return_credit=True)
        padded = np.concatenate(
            [x, rng.normal(size=(BATCH, 2, INPUT_DIM)).astype("float32")], 1)
        mask = np.arange(NUM_INPUTS)[None].repeat(BATCH, 0) < 5
        padded_outputs, padded_couplings, padded_credit = layer(
            padded, mask=mask, return_couplings=True, return_credit=True)
        self.assertAllClose(padded_outputs, outputs, atol=1e-5, rtol=1e-5)
        self.assertAllClose(keras.ops.convert_to_numpy(padded_credit)[:, :5],
                            credit, atol=1e-5, rtol=1e-5)
        self.assertAllClose(keras.ops.convert_to_numpy(padded_credit)[:, 5:],
                            0.0)
        # The shares: (batch, 1, inputs, outputs), zero for the padding.
        padded_couplings = keras.ops.convert_to_numpy(padded_couplings)
        self.assertAllClose(padded_couplings[:, :, :5], couplings,
                            atol=1e-5, rtol=1e-5)
        self.assertAllClose(padded_couplings[:, :, 5:], 0.0)

    def test_causal_mask(self):
        # Output j may use inputs i <= j: the reference's tril(diagonal=-1)
        # "ignore" mask, inverted.
        rng = np.random.default_rng(5)
        weights = random_weights(rng, NUM_OUTPUTS)
        x = rng.normal(size=(2, NUM_OUTPUTS, INPUT_DIM)).astype("float32")
        causal = np.triu(np.ones((NUM_OUTPUTS, NUM_OUTPUTS), bool))
        layer = make_layer(weights, NUM_OUTPUTS, num_iterations=3)
        outputs, couplings, credit = layer(
            x, routing_mask=causal, return_couplings=True, return_credit=True)
        credit = keras.ops.convert_to_numpy(credit)
        self.assertAllClose(credit[:, ~causal], 0.0)
        # Each input's shares: over its allowed outputs only.
        couplings = keras.ops.convert_to_numpy(couplings)[:, 0]
        self.assertAllClose(couplings[:, ~causal], 0.0)
        self.assertAllClose(couplings.sum(-1), np.ones((2, NUM_OUTPUTS)),
                            atol=1e-6)
        expected, _, _ = reference_outputs(x, weights, 3, None, causal)
        self.assertAllClose(outputs, expected, atol=5e-5, rtol=1e-4)

    @parameterized.named_parameters(
        ("float32", "float32"), ("mixed_float16", "mixed_float16"),
        ("mixed_bfloat16", "mixed_bfloat16"))
    def test_fully_masked_rows_stay_finite(self, policy):
        rng = np.random.default_rng(13)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        padding, routing = make_masks(rng, "both")
        padding[0] = False  # a fully masked example
        routing[4] = False  # a second input that may route nowhere
        for num_inputs, memory_efficient in ((NUM_INPUTS, True),
                                             (None, False)):
            layer = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM,
                                  num_inputs=num_inputs, num_iterations=3,
                                  memory_efficient=memory_efficient,
                                  dtype=policy)
            kwargs = {"mask": padding, "routing_mask": routing}
            outputs, gradients = value_and_gradients(layer, x, **kwargs)
            self.assertAllFinite(outputs, f"outputs under {policy}")
            self.assertAllFinite(gradients, f"gradients under {policy}")
            _, couplings, credit = layer(x, return_couplings=True,
                                         return_credit=True, **kwargs)
            credit = np.asarray(keras.ops.convert_to_numpy(
                keras.ops.cast(credit, "float32")))
            self.assertAllFinite(credit)
            self.assertAllClose(credit[:, [2, 4]], 0.0)
            self.assertAllClose(credit[0], 0.0)
            # Shares: zero for inputs with no allowed output, a
            # probability over the allowed outputs of the others.
            couplings = np.asarray(keras.ops.convert_to_numpy(
                keras.ops.cast(couplings, "float32")))[:, 0]
            self.assertAllFinite(couplings)
            self.assertAllClose(couplings[:, [2, 4]], 0.0)
            self.assertAllClose(couplings[0], 0.0)
            routed = padding & routing.any(axis=1)[None]
            self.assertAllClose(couplings.sum(-1)[routed], 1.0, atol=1e-2)
            self.assertAllClose(couplings.sum(-1)[~routed], 0.0)
            # A fully masked example gives zeros before normalisation.
            self.assertAllClose(keras.ops.cast(outputs[0], "float32"), 0.0)

    @parameterized.named_parameters(("mixed_float16", "mixed_float16"),
                                    ("mixed_bfloat16", "mixed_bfloat16"))
    def test_mixed_precision_close_to_float32(self, policy):
        rng = np.random.default_rng(17)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        layer = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM, num_iterations=3)
        expected = keras.ops.convert_to_numpy(layer(x))
        half = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM, num_iterations=3,
                             dtype=policy)
        half.build(x.shape)
        half.set_weights(layer.get_weights())
        outputs, gradients = value_and_gradients(half, x)
        self.assertEqual(keras.backend.standardize_dtype(outputs.dtype),
                         policy.split("_")[1])
        self.assertAllFinite(gradients)
        self.assertAllClose(keras.ops.cast(outputs, "float32"), expected,
                            atol=0.15, rtol=0.1)

    def test_symbolic_variable_length_and_credit(self):
        inputs = keras.Input((None, INPUT_DIM))
        outputs, couplings, credit = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM)(
            inputs, return_couplings=True, return_credit=True)
        self.assertEqual(tuple(outputs.shape), (None, NUM_OUTPUTS, OUTPUT_DIM))
        self.assertEqual(tuple(couplings.shape),
                         (None, 1, None, NUM_OUTPUTS))
        self.assertEqual(tuple(credit.shape), (None, None, NUM_OUTPUTS))
        model = keras.Model(inputs, [outputs, couplings, credit])
        for length in (3, 8):
            x = np.ones((2, length, INPUT_DIM), "float32")
            results = model(x)
            self.assertEqual(tuple(results[1].shape),
                             (2, 1, length, NUM_OUTPUTS))
            self.assertEqual(tuple(results[2].shape),
                             (2, length, NUM_OUTPUTS))

    def test_couplings_and_credit_flags(self):
        layer = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM)
        x = np.random.default_rng(4).normal(
            size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        outputs, couplings, credit = layer(x, return_couplings=True,
                                           return_credit=True)
        self.assertEqual(layer.normalization_axis, "parents")
        self.assertEqual(tuple(couplings.shape),
                         (BATCH, 1, NUM_INPUTS, NUM_OUTPUTS))
        self.assertAllClose(keras.ops.sum(couplings, axis=3),
                            np.ones((BATCH, 1, NUM_INPUTS)), atol=1e-6)
        # phi is signed, the shares are not.
        self.assertLess(float(np.min(keras.ops.convert_to_numpy(credit))),
                        0.0)
        self.assertGreaterEqual(
            float(np.min(keras.ops.convert_to_numpy(couplings))), 0.0)
        self.assertAllClose(layer(x), outputs)
        only_couplings = layer(x, return_couplings=True)
        only_credit = layer(x, return_credit=True)
        self.assertLen(only_couplings, 2)
        self.assertLen(only_credit, 2)
        self.assertAllClose(only_couplings[1], couplings)
        self.assertAllClose(only_credit[1], credit)
        # The trace holds the shares, as the couplings output.
        trace = layer.routing_trace(x)
        self.assertAllClose(trace["couplings"][-1], couplings)

    def test_keras_padding_mask_from_embedding(self):
        tokens = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 2]])
        inputs = keras.Input((None,), dtype="int32")
        embedded = keras.layers.Embedding(10, INPUT_DIM, mask_zero=True,
                                          name="embedding")(inputs)
        routing = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM, name="routing")
        model = keras.Model(inputs, routing(embedded))
        outputs = model(tokens)
        embeddings = model.get_layer("embedding")(tokens)
        expected = routing(embeddings, mask=tokens != 0)
        self.assertAllClose(outputs, expected, atol=1e-6)
        unpadded = routing(embeddings[:1, :3])
        self.assertAllClose(outputs[:1], unpadded, atol=1e-5)

    def test_variable_length_model_saving(self):
        inputs = keras.Input((None, INPUT_DIM))
        hidden = VectorRouting(NUM_OUTPUTS, 8, name="hidden")(inputs)
        logits = VectorRouting(3, 1, num_inputs=NUM_OUTPUTS,
                               normalize=False, name="classes")(hidden)
        model = keras.Model(inputs, logits)
        rng = np.random.default_rng(19)
        restored = self.run_model_saving_test(
            model, rng.normal(size=(2, 6, INPUT_DIM)).astype("float32"),
            atol=1e-5, rtol=1e-5)
        x = rng.normal(size=(2, 11, INPUT_DIM)).astype("float32")
        self.assertAllClose(restored(x), model(x), atol=1e-5, rtol=1e-5)

    @pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                        reason="SavedModel export needs TensorFlow")
    def test_saved_model_export(self):
        import tensorflow as tf

        rng = np.random.default_rng(23)
        for num_inputs in (6, None):
            inputs = keras.Input((num_inputs, INPUT_DIM))
            outputs = VectorRouting(NUM_OUTPUTS, OUTPUT_DIM,
                                    num_inputs=num_inputs)(inputs)
            model = keras.Model(inputs, outputs)
            path = os.path.join(self.get_temp_dir(), "exported")
            model.export(path, format="tf_saved_model", verbose=False)
            loaded = tf.saved_model.load(path)
            lengths = (6, 6) if num_inputs else (6, 13)
            for batch, length in zip((1, 3), lengths, strict=True):
                x = rng.normal(size=(batch, length, INPUT_DIM))
                x = x.astype("float32")
                self.assertAllClose(loaded.serve(x), model(x), atol=1e-5,
                                    rtol=1e-5)

    def test_compose_credit_through_stacked_routings(self):
        rng = np.random.default_rng(29)
        x = rng.normal(size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
        first = VectorRouting(NUM_OUTPUTS, 8)
        second = VectorRouting(3, 1, num_inputs=NUM_OUTPUTS, normalize=False)
        hidden, phi_1 = first(x, return_credit=True)
        _, phi_2 = second(hidden, return_credit=True)
        composed = compose_credit_assignments([phi_1, phi_2])
        self.assertEqual(tuple(composed.shape), (BATCH, NUM_INPUTS, 3))
        expected = reference.compose_credit_assignments(
            [keras.ops.convert_to_numpy(phi_1),
             keras.ops.convert_to_numpy(phi_2)])
        self.assertAllClose(composed, expected, atol=1e-5, rtol=1e-5)

    def test_paper_head_parameter_counts(self):
        # The paper's classification head (`RoutingHead` in `models.py` of
        # glassroom/heinsen_routing_2022_paper) at d = 1024.
        first = VectorRouting(64, 1024)
        first.build((None, None, 1024))
        self.assertEqual(_num_trainable(first), 2_491_649)
        second = VectorRouting(64, 1024, num_inputs=64)
        second.build((None, 64, 1024))
        self.assertEqual(_num_trainable(second), 2_441_280)
        for num_classes in (2, 10):
            head = VectorRouting(num_classes, 1, num_inputs=64,
                                 normalize=False)
            head.build((None, 64, 1024))
            self.assertEqual(_num_trainable(head),
                             67_648 + 3_329 * num_classes)

    def test_weight_shapes_and_initializers(self):
        num_inputs, input_dim, num_outputs, output_dim = 96, 128, 32, 64
        layer = VectorRouting(num_outputs, output_dim, num_inputs=num_inputs)
        layer.build((None, num_inputs, input_dim))
        stds = {
            "W_A": 2.0 / np.sqrt(input_dim), "W_F1": 1.0,
            "W_F2": 2.0 / np.sqrt(input_dim), "W_G1": 1.0 / np.sqrt(output_dim),
            "W_G2": 1.0, "W_S": 1.0 / np.sqrt(input_dim), "beta_use": 1.0,
            "beta_ign": 1.0,
        }
        shapes = {
            "W_A": (num_inputs, input_dim), "B_A": (num_inputs,),
            "W_F1": (num_outputs, input_dim), "W_F2": (input_dim, output_dim),
            "B_F2": (num_outputs, output_dim),
            "W_G1": (output_dim, input_dim), "W_G2": (num_outputs, input_dim),
            "B_G2": (num_outputs, input_dim), "W_S": (num_inputs, num_outputs),
            "B_S": (num_inputs, num_outputs),
            "beta_use": (num_inputs, num_outputs),
            "beta_ign": (num_inputs, num_outputs),
        }
        for name, shape in shapes.items():
            value = keras.ops.convert_to_numpy(getattr(layer,
                                                       PAPER_NAMES[name]))
            self.assertEqual(value.shape, shape, name)
            if name in stds:
                self.assertAllClose(value.mean(), 0.0, atol=0.1 * stds[name])
                self.assertAllClose(value.std(), stds[name], rtol=0.1,
                                    msg=name)
            else:
                self.assertAllClose(value, 0.0, msg=name)
        variable = VectorRouting(num_outputs, output_dim)
        variable.build((None, None, input_dim))
        self.assertEqual(tuple(variable.score_kernel.shape), (1, input_dim))
        self.assertEqual(tuple(variable.similarity_scale.shape),
                         (1, num_outputs))
        limit = 1.0 / np.sqrt(input_dim)
        for name in ("use_benefit_kernel", "use_benefit_bias",
                     "ignore_cost_kernel", "ignore_cost_bias"):
            value = keras.ops.convert_to_numpy(getattr(variable, name))
            self.assertLessEqual(np.abs(value).max(), limit)
            self.assertGreater(np.abs(value).max(), 0.5 * limit)
        self.assertEqual(tuple(variable.use_benefit_kernel.shape),
                         (input_dim, num_outputs))

    @parameterized.named_parameters(
        ("one_capsule", {"num_capsules": 1}, ValueError, "num_capsules"),
        ("string_capsules", {"num_capsules": "4"}, TypeError,
         "num_capsules"),
        ("zero_dim", {"capsule_dim": 0}, ValueError, "capsule_dim"),
        ("zero_inputs", {"num_inputs": 0}, ValueError, "num_inputs"),
        ("variable_as_minus_one", {"num_inputs": -1}, ValueError,
         "num_inputs"),
        ("float_inputs", {"num_inputs": 2.5}, TypeError, "num_inputs"),
        ("zero_iterations", {"num_iterations": 0}, ValueError,
         "num_iterations"),
        ("normalize_string", {"normalize": "yes"}, TypeError, "normalize"),
        ("memory_efficient_none", {"memory_efficient": None}, TypeError,
         "memory_efficient"),
    )
    def test_bad_arguments(self, override, error, name):
        kwargs = {"num_capsules": 4, "capsule_dim": 4, **override}
        with self.assertRaisesRegex(error, f"`{name}`.*Received: {name}="):
            VectorRouting(**kwargs)

    def test_bad_input_shapes(self):
        layer = VectorRouting(3, 4, num_inputs=6)
        with self.assertRaisesRegex(ValueError, "ndim=3"):
            layer(keras.KerasTensor((None, 16)))
        with self.assertRaisesRegex(
                ValueError, "num_inputs=6.*num_inputs=None.*Received: "
                "input_shape=\\(None, 5, 8\\)"):
            layer(keras.KerasTensor((None, 5, 8)))
        with self.assertRaisesRegex(ValueError, "num_inputs=None"):
            VectorRouting(3, 4, num_inputs=6)(keras.KerasTensor(
                (None, None, 8)))
        with self.assertRaisesRegex(ValueError, "input dimension"):
            VectorRouting(3, 4)(keras.KerasTensor((None, None, None)))
        layer(np.zeros((2, 6, 8), "float32"))
        with self.assertRaisesRegex(ValueError, "axis -2.*value 6"):
            layer(np.zeros((2, 7, 8), "float32"))
        with self.assertRaisesRegex(ValueError, "axis -1.*value 8"):
            layer(np.zeros((2, 6, 5), "float32"))

    def test_bad_masks(self):
        layer = VectorRouting(3, 4)
        x = np.zeros((2, 6, 5), "float32")
        with self.assertRaisesRegex(
                ValueError, "routing_mask.*\\(6, 3\\).*Received: "
                "routing_mask.shape=\\(6, 4\\)"):
            layer(x, routing_mask=np.ones((6, 4), bool))
        with self.assertRaisesRegex(ValueError, "routing_mask.shape"):
            layer(x, routing_mask=np.ones((5, 3), bool))
        with self.assertRaisesRegex(ValueError, "routing_mask.shape"):
            layer(x, routing_mask=np.ones((3, 6, 3), bool))
        with self.assertRaisesRegex(ValueError, "routing_mask.shape"):
            layer(x, routing_mask=np.ones((3,), bool))
        with self.assertRaisesRegex(
                TypeError, "routing_mask.*Received: routing_mask.dtype="
                "float32"):
            layer(x, routing_mask=np.ones((6, 3), "float32"))
        with self.assertRaisesRegex(ValueError, "Received: mask.shape="
                                    "\\(2, 5\\)"):
            layer(x, mask=np.ones((2, 5), bool))
        with self.assertRaisesRegex(TypeError, "Received: mask.dtype=int"):
            layer(x, mask=np.ones((2, 6), "int32"))
        with self.assertRaisesRegex(ValueError, "routing_mask.shape"):
            layer(keras.KerasTensor((None, 6, 5)),
                  routing_mask=keras.KerasTensor((6, 2), dtype="bool"))

    @pytest.mark.large
    def test_long_sequence_smoke(self):
        # The memory-efficient mode at a length where the eager vote tensor
        # would take 2.5 GB; values and gradients stay finite.
        x = np.random.default_rng(31).normal(size=(1, 300_000, 64))
        layer = VectorRouting(32, 64)
        outputs, gradients = value_and_gradients(layer, x.astype("float32"))
        self.assertEqual(tuple(outputs.shape), (1, 32, 64))
        self.assertAllFinite(outputs)
        self.assertAllFinite(gradients)
