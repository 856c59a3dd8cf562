"""The routing temperature of every softmax router, against NumPy references.

Each router is checked against its own NumPy reference (written from the
paper's equations) with the couplings `softmax(logits / temperature)`; the
references' `np.inf` and `0.0` temperatures are the exact limits (uniform
couplings, all of a child's coupling on its best parent), which the layer
must approach for very large and very small temperatures. The checks every
router shares (saving a changed temperature, finite outputs and gradients
below the minimum temperature in float16 and bfloat16) are in
`router_contract_test.py`.
"""


import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_caps.layers import DynamicRouting
from keras_caps.layers import FCCaps
from keras_caps.layers import InvertedAttentionRouting
from keras_caps.layers import Router
from keras_caps.testing import TestCase
from tests.layers import reference
from tests.layers import routing_reference
from tests.layers.inverted_attention_fixtures import hand_set
from tests.layers.vector_routing_test import BATCH
from tests.layers.vector_routing_test import INPUT_DIM
from tests.layers.vector_routing_test import NUM_INPUTS
from tests.layers.vector_routing_test import make_layer
from tests.layers.vector_routing_test import make_masks
from tests.layers.vector_routing_test import mask_kwargs
from tests.layers.vector_routing_test import random_weights
from tests.layers.vector_routing_test import reference_outputs

ROUTERS = ("fc_caps", "dynamic_routing", "inverted_attention",
           "vector_routing", "vector_routing_masked")


class _Case:
    """A router with hand-set weights, its inputs and its NumPy reference.

    `expected(temperature)` is `(outputs, couplings)`, the couplings
    converted to the `Router` layout `(batch, 1, children, parents)`.
    """

    def __init__(self, router, **options):
        rng = np.random.default_rng(7)
        self.call_kwargs = {}
        if router == "fc_caps":
            self.inputs = rng.normal(size=(3, 6, 4)).astype("float32")
            self.layer = FCCaps(3, 5, **options)
            self.layer.build(self.inputs.shape)
            kernel = rng.normal(size=(3, 6, 4, 5)).astype("float32") * 0.5
            prior = rng.normal(size=(3, 6, 1)).astype("float32") * 0.1
            self.layer.kernel.assign(kernel)
            self.layer.prior.assign(prior)
            self._reference = lambda t: reference.fc_caps(
                self.inputs.astype("float64"), kernel, prior, 5, t)
            # (b, j, i) -> (b, 1, i, j)
            self._layout = lambda c: c.transpose(0, 2, 1)[:, None]
        elif router == "dynamic_routing":
            self.inputs = rng.normal(size=(3, 5, 4)).astype("float32")
            self.layer = DynamicRouting(3, 2, num_iterations=2, **options)
            self.layer.build(self.inputs.shape)
            kernel = rng.normal(size=(5, 4, 3, 2)).astype("float32") * 0.8
            self.layer.kernel.assign(kernel)
            self._reference = lambda t: routing_reference.dynamic_routing(
                self.inputs.astype("float64"), kernel.astype("float64"), 2,
                temperature=t)
            # (b, i, j) -> (b, 1, i, j)
            self._layout = lambda c: c[:, None]
        elif router == "inverted_attention":
            self.inputs = rng.normal(size=(3, 5, 4)).astype("float32")
            self.layer = InvertedAttentionRouting(
                3, 3, pose="vector", num_iterations=2, **options)
            self.layer.build(self.inputs.shape)
            layer_reference = hand_set(self.layer, rng)

            def expected(temperature):
                layer_reference.temperature = temperature
                return layer_reference.route(self.inputs.astype("float64"), 2)

            self._reference = expected
            # (b, x = 1, i, j) is the Router layout already.
            self._layout = lambda c: c
        else:
            weights = random_weights(rng, NUM_INPUTS)
            self.inputs = rng.normal(
                size=(BATCH, NUM_INPUTS, INPUT_DIM)).astype("float32")
            masks = (make_masks(rng, "both")
                     if router == "vector_routing_masked" else (None, None))
            self.call_kwargs = mask_kwargs(*masks)
            self.layer = make_layer(weights, NUM_INPUTS, **options)
            # The outputs and the last E-step's shares R (the couplings).
            self._reference = lambda t: reference_outputs(
                self.inputs, weights, 2, *masks, temperature=t)[::2]
            # R (b, i, j) -> (b, 1, i, j)
            self._layout = lambda c: c[:, None]

    def expected(self, temperature):
        outputs, couplings = self._reference(temperature)
        return outputs, self._layout(couplings)

    def outputs(self):
        outputs, couplings = self.layer(self.inputs, return_couplings=True,
                                        **self.call_kwargs)
        return (keras.ops.convert_to_numpy(outputs),
                keras.ops.convert_to_numpy(couplings))


class RoutingTemperatureTest(TestCase):
    @parameterized.product(router=ROUTERS, temperature=(0.25, 1.0, 4.0))
    def test_matches_numpy_reference(self, router, temperature):
        # Set after `build`: the variable reaches the routing.
        case = _Case(router)
        case.layer.temperature = temperature
        self.assertEqual(case.layer.temperature, temperature)
        outputs, couplings = case.outputs()
        expected, expected_couplings = case.expected(temperature)
        self.assertAllClose(outputs, expected, atol=5e-5, rtol=1e-4)
        self.assertAllClose(couplings, expected_couplings, atol=5e-5,
                            rtol=1e-4)
        # Guards the test: the temperature moves the reference.
        if temperature != 1.0:
            self.assertGreater(
                np.max(np.abs(case.expected(1.0)[1] - expected_couplings)),
                1e-2)

    @parameterized.product(router=ROUTERS)
    def test_limits_uniform_and_one_hot(self, router):
        case = _Case(router, temperature=1e5)
        outputs, couplings = case.outputs()
        expected, expected_couplings = case.expected(np.inf)
        self.assertAllClose(couplings, expected_couplings, atol=1e-3)
        self.assertAllClose(outputs, expected, atol=1e-3, rtol=1e-3)
        # Below Router.MIN_TEMPERATURE the softmax divides by it: the layer
        # routes as the reference at MIN_TEMPERATURE...
        case.layer.temperature = 1e-5
        outputs, couplings = case.outputs()
        expected, expected_couplings = case.expected(Router.MIN_TEMPERATURE)
        self.assertAllClose(couplings, expected_couplings, atol=1e-5)
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
        # ... which is the one-hot limit (the reference at temperature 0)
        # for every child whose best parent leads by a logit gap well above
        # MIN_TEMPERATURE: most children here. (The last pass's logits do
        # not depend on the temperature: the first pass is uniform.)
        _, limit_couplings = case.expected(0.0)
        clear = expected_couplings.max(axis=-1, keepdims=True) > 1 - 1e-6
        routed = expected_couplings.sum(axis=-1, keepdims=True) > 0.0
        self.assertGreater(float(np.mean(clear[routed])), 0.75)
        self.assertAllClose(np.where(clear, couplings, limit_couplings),
                            limit_couplings, atol=1e-6)

    @parameterized.product(router=ROUTERS)
    def test_bad_temperature(self, router):
        layer = _Case(router).layer
        for value, error in ((0.0, ValueError), (-1.0, ValueError),
                             (float("inf"), ValueError),
                             (float("nan"), ValueError), (True, TypeError),
                             ("1.0", TypeError)):
            with self.assertRaisesRegex(error, "`temperature`.*Received"):
                type(layer)(**{**layer.get_config(), "temperature": value})
            with self.assertRaisesRegex(error, "`temperature`.*Received"):
                layer.temperature = value
        self.assertEqual(layer.temperature, 1.0)

    @parameterized.product(router=ROUTERS)
    def test_files_without_the_temperature_are_refused(self, router):
        # keras_caps 0.1.0 saved a router's own variables but the
        # temperature (the last of them); sublayers kept their own entries.
        # Such weights are refused with one line; the layer keeps its own.
        case = _Case(router, temperature=2.0)
        store = {}
        case.layer.save_own_variables(store)
        del store[str(len(store) - 1)]  # the temperature
        fresh = _Case(router, temperature=2.0).layer
        before = fresh.get_weights()
        with self.assertRaisesRegex(
                ValueError, f"^The weights of `{type(fresh).__name__}` "
                f"layer {fresh.name!r} were saved by keras_caps 0.1.0 "
                "before routers had a temperature .*; keras_caps 0.2.0 "
                "does not load such files"):
            fresh.load_own_variables(store)
        for got, want in zip(fresh.get_weights(), before, strict=True):
            self.assertAllClose(got, want)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="counts TensorFlow traces")
def test_changing_the_temperature_does_not_retrace():
    import tensorflow as tf

    layer = DynamicRouting(3, 2)
    inputs = np.random.default_rng(0).normal(size=(2, 5, 4)).astype(
        "float32")
    layer.build(inputs.shape)
    function = tf.function(lambda x: layer(x, return_couplings=True)[1])
    sharp = function(inputs)
    layer.temperature = 1e4
    uniform = function(inputs)
    assert function.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(uniform.numpy(), 1.0 / 3.0, atol=1e-4)
    assert np.max(np.abs(sharp.numpy() - uniform.numpy())) > 1e-3
