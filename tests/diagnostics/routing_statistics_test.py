import keras
import numpy as np
from absl.testing import parameterized

from keras_caps import diagnostics
from keras_caps import layers
from keras_caps.testing import TestCase
from tests.layers import attention_routing_reference
from tests.visualization import tiny_models


def _entropy_by_loops(couplings, over_children=False):
    """Mean entropy per head, child by child (or parent by parent)."""
    batch, heads, children, parents = couplings.shape
    result = np.zeros(heads)
    for h in range(heads):
        values = []
        for b in range(batch):
            if over_children:
                for j in range(parents):
                    p = couplings[b, h, :, j]
                    values.append(-sum(x * np.log(x) for x in p if x > 0))
            else:
                for i in range(children):
                    p = couplings[b, h, i]
                    values.append(-sum(x * np.log(x) for x in p if x > 0))
        result[h] = np.mean(values)
    return result


def _concentration_by_loops(couplings):
    batch, heads, children, parents = couplings.shape
    result = np.zeros(parents)
    for j in range(parents):
        shares = []
        for b in range(batch):
            for h in range(heads):
                column = sorted(couplings[b, h, :, j], reverse=True)
                shares.append(sum(column[:3]) / sum(column))
        result[j] = np.mean(shares)
    return result


def _random_couplings(rng, shape, axis):
    logits = rng.normal(size=shape) * 2.0
    e = np.exp(logits)
    return e / e.sum(axis=axis, keepdims=True)


class RoutingDiagnosticsTest(TestCase):
    @parameterized.named_parameters(("parents", "parents", 3),
                                    ("children", "children", 2))
    def test_matches_formulas(self, normalization, axis):
        rng = np.random.default_rng(0)
        couplings = [_random_couplings(rng, (2, 2, 5, 3), axis)
                     for _ in range(2)]
        votes = rng.normal(size=(2, 5, 3, 4))
        parents = [rng.normal(size=(2, 3, 4)) for _ in range(2)]
        found = diagnostics.routing_diagnostics(
            couplings, votes=votes, parents=parents,
            normalization=normalization)
        expected = _entropy_by_loops(couplings[-1],
                                     normalization == "children")
        self.assertAllClose(found["entropy_per_head"], expected)
        self.assertAllClose(found["entropy"], np.mean(expected))
        self.assertAllClose(found["top3_concentration"],
                            _concentration_by_loops(couplings[-1]))
        self.assertAllClose(
            found["geometric_agreement"],
            [np.mean(attention_routing_reference.geometric_agreement(
                c, votes, v)) for c, v in zip(couplings, parents)])

    def test_collapsed_and_uniform_heads(self):
        one_hot = np.zeros((1, 1, 4, 3))
        one_hot[0, 0, :, 1] = 1.0
        uniform = np.full((1, 1, 4, 3), 1.0 / 3.0)
        found = diagnostics.routing_diagnostics(
            np.concatenate([one_hot, uniform], axis=1))
        self.assertAllClose(found["entropy_per_head"], [0.0, np.log(3.0)])

    def test_layer_diagnostics_of_attention_routing(self):
        keras.utils.set_random_seed(4)
        children = keras.Input((6, 4), name="capsules")
        layer = layers.AttentionRouting(3, 4, num_heads=2, key_dim=2,
                                        num_iterations=2, name="routing")
        model = keras.Model(children, layers.Length()(layer(children)))
        inputs = np.random.default_rng(1).normal(size=(2, 6, 4))
        found = diagnostics.routing_layer_diagnostics(model, inputs)
        self.assertEqual(list(found), ["routing"])
        trace = layer.routing_trace(inputs.astype("float32"))
        numpy = keras.ops.convert_to_numpy
        couplings = [numpy(c).astype("float64") for c in trace["couplings"]]
        self.assertAllClose(found["routing"]["entropy_per_head"],
                            _entropy_by_loops(couplings[-1]), atol=1e-6)
        self.assertAllClose(
            found["routing"]["geometric_agreement"],
            [np.mean(attention_routing_reference.geometric_agreement(
                c, numpy(trace["votes"]), numpy(v)))
             for c, v in zip(couplings, trace["parents"])], atol=1e-5,
            rtol=1e-5)
        self.assertLen(found["routing"]["geometric_agreement"], 2)

    def test_layer_diagnostics_of_dynamic_routing(self):
        model = tiny_models.tiny_capsnet(routing="dynamic_routing")
        images = tiny_models.random_images(2, (12, 12, 1))
        found = diagnostics.routing_layer_diagnostics(model, images)
        children = keras.Model(model.input["image"],
                               model.get_layer("primary_caps").output)(images)
        layer = model.get_layer("digit_caps")
        _, couplings = layer(children, return_couplings=True)
        couplings = keras.ops.convert_to_numpy(couplings).astype(
            "float64")  # (b, 1, i, j)
        self.assertAllClose(found["digit_caps"]["entropy_per_head"],
                            _entropy_by_loops(couplings), atol=1e-6)
        # Every iteration's L_geo, from the votes of the trace.
        trace = layer.routing_trace(children)
        numpy = keras.ops.convert_to_numpy
        self.assertAllClose(
            found["digit_caps"]["geometric_agreement"],
            [np.mean(attention_routing_reference.geometric_agreement(
                numpy(c).astype("float64"), numpy(trace["votes"]),
                numpy(v))) for c, v in zip(trace["couplings"],
                                           trace["parents"])],
            atol=1e-5, rtol=1e-5)
        self.assertLen(found["digit_caps"]["geometric_agreement"],
                       layer.num_iterations)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "`normalization`"):
            diagnostics.routing_diagnostics(np.ones((1, 1, 2, 2)),
                                              normalization="heads")
        with self.assertRaisesRegex(ValueError, "`couplings`.*4 axes"):
            diagnostics.routing_diagnostics(np.ones((1, 2, 2)))
        with self.assertRaisesRegex(ValueError, "both `votes` and"):
            diagnostics.routing_diagnostics(np.ones((1, 1, 2, 2)),
                                              votes=np.ones((1, 2, 2, 3)))
        with self.assertRaisesRegex(ValueError, "one `parents` array"):
            diagnostics.routing_diagnostics(
                [np.ones((1, 1, 2, 2))], votes=np.ones((1, 2, 2, 3)),
                parents=[np.ones((1, 2, 3))] * 2)
