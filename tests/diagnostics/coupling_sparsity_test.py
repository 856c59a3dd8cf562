import keras
import numpy as np

from keras_caps import layers
from keras_caps.callbacks import RoutingDiagnostics
from keras_caps.diagnostics import routing_diagnostics
from keras_caps.testing import TestCase


def _zeros_by_loops(couplings):
    """Share of exact zeros per head, entry by entry."""
    batch, heads, children, parents = couplings.shape
    shares = []
    for h in range(heads):
        zeros = sum(couplings[b, h, i, j] == 0.0 for b in range(batch)
                    for i in range(children) for j in range(parents))
        shares.append(zeros / (batch * children * parents))
    return np.array(shares)


class CouplingSparsityTest(TestCase):
    def test_sparsity_counts_exact_zeros_per_head(self):
        rng = np.random.default_rng(0)
        couplings = rng.uniform(size=(2, 3, 5, 4))
        couplings[rng.uniform(size=couplings.shape) < 0.4] = 0.0
        couplings[0, 1] = 1e-30  # tiny is not zero
        found = routing_diagnostics(couplings)
        expected = _zeros_by_loops(couplings)
        self.assertAllClose(found["sparsity_per_head"], expected, atol=0.0)
        self.assertAllClose(found["sparsity"], expected.mean(), atol=1e-12)
        self.assertEqual(routing_diagnostics(
            np.full((1, 1, 2, 2), 0.5))["sparsity"], 0.0)
        # Only the last pass counts.
        found = routing_diagnostics([np.zeros((1, 1, 2, 2)),
                                     np.full((1, 1, 2, 2), 0.5)])
        self.assertEqual(found["sparsity"], 0.0)

    def test_callback_logs_the_sparsity_of_sparse_couplings(self):
        keras.utils.set_random_seed(0)
        children = keras.Input((6, 4), name="capsules")
        router = layers.AttentionRouting(3, 4, num_heads=2, key_dim=2,
                                         coupling="sparsemax",
                                         temperature=0.05, name="routing")
        model = keras.Model(children, router(children))
        inputs = np.random.default_rng(1).normal(size=(2, 6, 4))
        callback = RoutingDiagnostics(inputs)
        callback.set_model(model)
        values = callback.diagnostics()
        _, couplings = router(inputs.astype("float32"),
                              return_couplings=True)
        expected = _zeros_by_loops(keras.ops.convert_to_numpy(couplings))
        self.assertGreater(expected.min(), 0.1)
        self.assertAllClose(values["routing_routing_sparsity"],
                            expected.mean(), atol=1e-9)
        for head in range(2):
            self.assertAllClose(
                values[f"routing_routing_sparsity_head_{head}"],
                expected[head], atol=1e-9)
