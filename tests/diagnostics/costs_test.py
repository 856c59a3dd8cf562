"""Multiply–adds and parameters counted from shapes.

References: hand counts of a small stem (each output value of a
convolution is one window of its group's input channels), hand-derived
router formulas, and, on JAX, XLA's own flop count of a router's call
(`cost_analysis`), which counts 2 flops per multiply–add plus the
elementwise work the convention leaves out.
"""

import keras
import numpy as np
import pytest

from keras_caps import layers
from keras_caps.applications import CapsuleClassifier
from keras_caps.diagnostics import count_multiply_adds
from keras_caps.diagnostics import count_parameters


def _stem():
    images = keras.Input((16, 16, 2))
    # 8 x 8 x 4 outputs, each 3 x 3 x (2 / 2 groups) = 9 -> 2,304
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same", groups=2,
                            name="conv")(images)
    x = keras.layers.BatchNormalization(name="bn")(x)
    # 6 x 6 x (4 * 2) outputs, each 3 x 3 -> 2,592
    x = keras.layers.DepthwiseConv2D(3, depth_multiplier=2,
                                     name="depthwise")(x)
    x = keras.layers.GroupNormalization(groups=2, name="gn")(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.Flatten()(x)  # 288
    # 288 x 5 -> 1,440
    x = keras.layers.Dense(5, name="dense")(x)
    return images, keras.layers.LayerNormalization(name="ln")(x)


@pytest.mark.single_backend
def test_small_stem_matches_hand_count():
    images, outputs = _stem()
    count = count_multiply_adds(keras.Model(images, outputs))
    assert count["per_layer"] == {"conv": 2304, "depthwise": 2592,
                                  "dense": 1440}
    assert count["total"] == 2304 + 2592 + 1440
    assert count["decoder"] == 0


@pytest.mark.single_backend
def test_decoder_counted_apart():
    images, features = _stem()
    decoder = keras.Sequential(
        [keras.Input((5,)), keras.layers.Dense(7, name="d1"),
         keras.layers.Dense(3, name="d2")], name="decoder")
    model = keras.Model(images, [features, decoder(features)])
    count = count_multiply_adds(model)
    assert count["total"] == 2304 + 2592 + 1440
    assert count["decoder"] == 5 * 7 + 7 * 3
    assert count["per_layer"]["decoder/d1"] == 35
    # Trainable: conv 3*3*1*4 + 4 = 40; bn 2 * 4 = 8; depthwise
    # 3*3*1*8 + 8 = 80; gn 2 * 8 = 16; dense 288*5 + 5 = 1445; ln 10;
    # decoder (5*7 + 7) + (7*3 + 3) = 66.
    assert count_parameters(model) == {
        "trainable": 40 + 8 + 80 + 16 + 1445 + 10 + 66,
        "trainable_without_decoder": 40 + 8 + 80 + 16 + 1445 + 10,
        "decoder": 66}


@pytest.mark.single_backend
def test_capsule_classifier_on_mnist():
    model = CapsuleClassifier("mnist", router="dynamic", compile=False)
    count = count_multiply_adds(model)
    per_layer = count["per_layer"]
    # Efficient-CapsNet's stem on 28 x 28 x 1 (valid convolutions):
    # 5x5x1 -> 32 (24 x 24), 3x3x32 -> 64 (22 x 22), 3x3x64 -> 64
    # (20 x 20), 3x3x64 -> 128 stride 2 (9 x 9); PrimaryCaps: a 9 x 9
    # depthwise window per channel; dynamic routing of 16 8-D capsules
    # to 10 16-D ones, 3 iterations: 16 * 10 * 16 * (8 + 2 * 3 - 1).
    expected = {"conv_1": 24 * 24 * 32 * 25, "conv_2": 22 * 22 * 64 * 288,
                "conv_3": 20 * 20 * 64 * 576, "conv_4": 9 * 9 * 128 * 576,
                "primary_caps": 128 * 81,
                "digit_caps": 16 * 10 * 16 * 13}
    assert {k: per_layer[k] for k in expected} == expected
    assert count["total"] == sum(expected.values())
    # The decoder: Dense 160 -> 512 -> 1024 -> 784.
    assert count["decoder"] == 160 * 512 + 512 * 1024 + 1024 * 784
    parameters = count_parameters(model)
    assert parameters["trainable_without_decoder"] == 161664
    assert parameters["decoder"] == (160 * 512 + 512 + 512 * 1024 + 1024
                                     + 1024 * 784 + 784)


class _Mystery(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 3))

    def call(self, inputs):
        return keras.ops.matmul(inputs, self.kernel)


@pytest.mark.single_backend
def test_unknown_layer_with_weights_is_refused():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, _Mystery(name="mystery")(inputs))
    with pytest.raises(ValueError, match="'mystery' \\(_Mystery\\)"):
        count_multiply_adds(model)
    with pytest.raises(TypeError, match="`model`"):
        count_multiply_adds("model.keras")


@pytest.mark.single_backend
def test_router_formulas_by_hand():
    # 12 children of 8 entries to 5 parents of 6 entries.
    shape = (None, 12, 8)
    pairs = 12 * 5
    cases = {
        # votes 8 * 6, agreement 6, weighted sum 6
        layers.FCCaps(5, 6): pairs * (48 + 12),
        # votes 48; 3 weighted sums and 2 agreements of 6
        layers.DynamicRouting(5, 6, num_iterations=3): pairs * (48 + 30),
        # + the bilinear term: 12 * 8 * 6 projections, 6 per pair
        layers.HybridRouting(5, 6, num_iterations=3): (
            pairs * (48 + 30) + 12 * 48 + pairs * 6),
        # votes 48; 2 agreement passes after the uniform one, 2 * 6 each
        layers.InvertedAttentionRouting(5, 6, pose="vector",
                                        num_iterations=3): (
            pairs * (48 + 24)),
        # votes 48, routing logits 8, weighted pose 6
        layers.SelfRouting(5, 6, input_format="vectors"): pairs * 62,
        # votes 48; 3 M-steps of 2 * 6, 2 E-steps of 6; activations 3 * 5
        # parents * 6
        layers.EMRouting(5, 6, input_kind="vector"): (
            pairs * (48 + 36 + 12) + 3 * 5 * 6),
    }
    for layer, expected in cases.items():
        layer(np.ones((1, 12, 8), "float32"))
        assert layer.multiply_adds(shape) == expected, type(layer).__name__


@pytest.mark.single_backend
def test_inverted_attention_stack_by_hand():
    # 6 children of 4 entries -> 3 parents -> 2 parents, 4-D vector poses,
    # 3 passes. Bottom: 18 pairs x (vote 16 once + 2 passes x 2 x 4);
    # top, concurrent: 6 pairs x (vote 16 in each of 3 passes + 16);
    # sequential: its votes once, 6 x (16 + 16).
    for schedule, top in (("concurrent", 6 * (48 + 16)),
                          ("sequential", 6 * (16 + 16))):
        stack = layers.InvertedAttentionRoutingStack(
            [layers.InvertedAttentionRouting(3, 4, pose="vector"),
             layers.InvertedAttentionRouting(2, 4, pose="vector")],
            num_iterations=3, schedule=schedule, name="stack")
        inputs = keras.Input((6, 4))
        count = count_multiply_adds(keras.Model(inputs, stack(inputs)))
        assert count["per_layer"] == {"stack": 18 * 32 + top}, schedule


def _xla_flops_per_example(layer, shape):
    """XLA's flops of one call, per example: batches of 4 and 8 differ by
    4 examples, which drops the work done once per batch."""
    import jax

    trainable = [v.value for v in layer.trainable_variables]
    other = [v.value for v in layer.non_trainable_variables]

    def flops(batch):
        def call(x):
            return layer.stateless_call(trainable, other, x)[0]

        x = np.ones((batch,) + shape, "float32")
        analysis = jax.jit(call).lower(x).compile().cost_analysis()
        if isinstance(analysis, (list, tuple)):
            analysis = analysis[0]
        return analysis["flops"]

    return (flops(8) - flops(4)) / 4


# 24 children of 32 entries to 6 parents of 32 entries: the contractions
# dominate, so XLA's flops are 2 per multiply–add plus at most 20 % of
# elementwise work. Each case: the layer, and what its implementation
# does beyond (or instead of) the paper's equations, per example.
_I, _A, _J, _Z = 24, 32, 6, 32
_XLA_CASES = {
    "FCCaps": (lambda: layers.FCCaps(_J, _Z), lambda n: n),
    "DynamicRouting": (lambda: layers.DynamicRouting(_J, _Z), lambda n: n),
    "HybridRouting_bilinear": (
        lambda: layers.HybridRouting(_J, _Z, attention="bilinear"),
        lambda n: n),
    "HybridRouting_concat": (
        lambda: layers.HybridRouting(_J, _Z, attention="concat"),
        lambda n: n),
    # The uniform first pass contracts the children with the vote
    # matrices once more (instead of summing the votes).
    "InvertedAttentionRouting": (
        lambda: layers.InvertedAttentionRouting(_J, _Z, pose="vector",
                                                num_iterations=3),
        lambda n: n + _I * _J * _A * _Z),
    # The weighted votes are contracted without being built (`_I _J _A
    # _Z`, as the votes), the queries folded into the key kernel: scores
    # `_I _A _J` instead of keys, scores and weighted sum.
    "AttentionRouting": (
        lambda: layers.AttentionRouting(_J, _Z, key_dim=32),
        lambda n: n - (_I * _A * 32 + _I * _J * 32 + _I * _J * _Z)
        + _I * _A * _J),
    "VectorRouting": (
        lambda: layers.VectorRouting(_J, _Z, num_inputs=_I,
                                     memory_efficient=False,
                                     num_iterations=3), lambda n: n),
    "EMRouting_vectors": (
        lambda: layers.EMRouting(_J, _Z, input_kind="vector",
                                 output_kind="vector"), lambda n: n),
    "SelfRouting": (
        lambda: layers.SelfRouting(_J, _Z, input_format="vectors",
                                   output_format="vectors"), lambda n: n),
}


# Each case compiles its router twice (about 7 s on 2 CPU cores): four
# run in CI's JAX stage, one per kind of formula (votes only, iterations,
# folded attention, per-child routing weights); the rest with --run_large.
_XLA_CASES_IN_CI = ("AttentionRouting", "DynamicRouting", "FCCaps",
                    "SelfRouting")


@pytest.mark.skipif(keras.backend.backend() != "jax",
                    reason="XLA's cost analysis through jax.jit")
@pytest.mark.parametrize("case", [
    pytest.param(case, marks=() if case in _XLA_CASES_IN_CI
                 else pytest.mark.large)
    for case in sorted(_XLA_CASES)])
def test_router_count_against_xla(case):
    make, implementation = _XLA_CASES[case]
    layer = make()
    layer(np.ones((2, _I, _A), "float32"))
    count = layer.multiply_adds((None, _I, _A))
    flops = _xla_flops_per_example(layer, (_I, _A))
    ratio = flops / (2 * implementation(count))
    assert 1.0 <= ratio <= 1.2, (case, count, flops, ratio)
