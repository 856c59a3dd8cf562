"""The contract every `Router` keeps, checked for every router.

Every concrete `Router` subclass of keras_caps is found by class search and
checked on its default construction (`num_capsules=3, capsule_dim=4` on
`(2, 6, 4)` children), so a new router is covered without an entry here;
`EXTRA_CASES` adds the forms a default construction does not reach (an
entry named like a class replaces that class's default case, for routers
whose inputs are not `(batch, children, dim)` vectors). The
checks: the couplings layout `(batch, heads, children, parents)` and its
normalisation, `routing_trace` (each pass's couplings are the tempered
softmax, or the router's `coupling` function, of its agreement, computed
here in NumPy), the temperature and
config round trips, and finite outputs and gradients at a temperature below
`Router.MIN_TEMPERATURE` under both mixed precisions.
"""

import inspect
import os
import sys

import keras
import numpy as np
from absl.testing import parameterized

import keras_caps
from keras_caps import layers
from keras_caps.testing import TestCase
from keras_caps.testing.test_case import value_and_gradients
from tests.ops import sparse_couplings_reference

CHILDREN_SHAPE = (2, 6, 4)  # (batch, children, dim)
EXTRA_CASES = {
    "HybridRouting_concat": (
        lambda **kw: layers.HybridRouting(
            3, 4, attention="concat", attention_weight=0.7,
            stop_inner_gradients=True, **kw), CHILDREN_SHAPE),
    "HybridRouting_bilinear_weighted": (
        lambda **kw: layers.HybridRouting(
            3, 4, attention="bilinear", attention_weight=-0.6, **kw),
        CHILDREN_SHAPE),
    "AttentionRouting_heads_children": (
        lambda **kw: layers.AttentionRouting(
            3, 4, num_heads=2, key_dim=2, num_iterations=2,
            normalization="children", **kw), CHILDREN_SHAPE),
    "InvertedAttentionRouting_conv": (
        lambda **kw: layers.InvertedAttentionRouting(
            3, 4, kernel_size=2, num_iterations=3, **kw), (2, 3, 3, 2, 4)),
    "VectorRouting_three_iterations": (
        lambda **kw: layers.VectorRouting(3, 4, num_inputs=6,
                                          num_iterations=3, **kw),
        CHILDREN_SHAPE),
    # The `coupling` options of the routers that offer them.
    "DynamicRouting_sparsemax": (
        lambda **kw: layers.DynamicRouting(3, 4, coupling="sparsemax",
                                           **kw), CHILDREN_SHAPE),
    "HybridRouting_entmax15": (
        lambda **kw: layers.HybridRouting(
            3, 4, attention="concat", attention_weight=0.7,
            coupling="entmax15", **kw), CHILDREN_SHAPE),
    "AttentionRouting_entmax15_heads_children": (
        lambda **kw: layers.AttentionRouting(
            3, 4, num_heads=2, key_dim=2, num_iterations=2,
            normalization="children", coupling="entmax15", **kw),
        CHILDREN_SHAPE),
    "AttentionRouting_sigmoid": (
        lambda **kw: layers.AttentionRouting(3, 4, coupling="sigmoid",
                                             **kw), CHILDREN_SHAPE),
    "DynamicRouting_gumbel_softmax": (
        lambda **kw: layers.DynamicRouting(
            3, 4, coupling="gumbel_softmax", seed=1, **kw), CHILDREN_SHAPE),
    # Capsules with an activation (pose entries, then an activation in
    # [0, 1]); routing weights drawn, so the agreement is not all zeros.
    "SelfRouting": (
        lambda **kw: layers.SelfRouting(
            3, 4, route_initializer="random_normal",
            bias_initializer="random_normal", **kw),
        lambda rng: np.concatenate(
            [rng.normal(size=(2, 6, 4)),
             rng.uniform(0.1, 1.0, size=(2, 6, 1))], -1).astype("float32")),
    "ConvSelfRouting": (
        lambda **kw: layers.ConvSelfRouting(
            3, 4, kernel_size=2, strides=2,
            route_initializer="random_normal",
            bias_initializer="random_normal", **kw),
        lambda rng: np.concatenate(
            [rng.normal(size=(2, 3, 3, 2, 4)),
             rng.uniform(0.1, 1.0, size=(2, 3, 3, 2, 1))],
            -1).astype("float32")),
    # Matrix capsules (a 4x4 pose, then an activation) on a 5x5 grid; a
    # child lies in up to 9 windows (`_child_groups`).
    "ConvMatrixCaps": (
        lambda **kw: layers.ConvMatrixCaps(3, kernel_size=3, **kw),
        lambda rng: np.concatenate(
            [rng.normal(size=(2, 5, 5, 2, 16)),
             rng.uniform(0.1, 1.0, size=(2, 5, 5, 2, 1))],
            -1).astype("float32")),
    # Matrix capsules on a grid with coordinate addition (Hinton et al.'s
    # class capsules), and vector capsules (their length the activation).
    "EMRouting": (
        lambda **kw: layers.EMRouting(3, coordinate_addition=True, **kw),
        lambda rng: np.concatenate(
            [rng.normal(size=(2, 2, 2, 2, 16)),
             rng.uniform(0.1, 1.0, size=(2, 2, 2, 2, 1))],
            -1).astype("float32")),
    "EMRouting_vectors": (
        lambda **kw: layers.EMRouting(3, 4, input_kind="vector", **kw),
        CHILDREN_SHAPE),
}


def concrete_routers():
    """Every `Router` subclass defined in keras_caps, by name.

    A class counts where its module holds it under its name.
    """
    found, pending = {}, [layers.Router]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        module = sys.modules[cls.__module__]
        if (cls is not layers.Router and not inspect.isabstract(cls)
                and cls.__module__.startswith("keras_caps.")
                and getattr(module, cls.__name__, None) is cls):
            found[cls.__name__] = cls
    return found


def router_cases():
    cases = {name: (lambda cls=cls, **kw: cls(3, 4, **kw), CHILDREN_SHAPE)
             for name, cls in concrete_routers().items()}
    cases.update(EXTRA_CASES)
    return cases


def _make(case, **kwargs):
    """The case's layer, called once on its inputs.

    A case's second entry is the children's shape (normal draws), or a
    callable `rng -> inputs` for routers with other inputs (a list such as
    `[poses, activations]`).
    """
    factory, shape = router_cases()[case]
    keras.utils.set_random_seed(3)
    layer = factory(**kwargs)
    rng = np.random.default_rng(5)
    if callable(shape):
        inputs = shape(rng)
    else:
        inputs = rng.normal(size=shape).astype("float32")
    layer(inputs)
    return layer, inputs


def _symbolic(inputs):
    """`keras.Input`s shaped like `inputs` (one array or a list)."""
    return keras.tree.map_structure(
        lambda array: keras.Input(array.shape[1:]), inputs)


def _shapes(inputs):
    return keras.tree.map_structure(lambda array: array.shape, inputs)


def _batch_size(inputs):
    return keras.tree.flatten(inputs)[0].shape[0]


def _numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype="float64")


def _axis(layer):
    return {"parents": 3, "children": 2}[layer.normalization_axis]


def _child_groups(layer, inputs):
    """`None`, or each couplings row's child, where a router names them.

    A convolutional router whose child lies in several windows (e.g.
    `ConvMatrixCaps`) normalises a child's rows together, over all its
    windows and parents: `couplings_children(input_shape)` numbers them.
    """
    children = getattr(layer, "couplings_children", None)
    return None if children is None else children(_shapes(inputs))


def _normalised_sums(layer, inputs, couplings):
    """The sums of `couplings` that the router keeps at 1."""
    groups = _child_groups(layer, inputs)
    if groups is None:
        return couplings.sum(axis=_axis(layer))
    return np.stack([couplings[:, :, groups == child].sum(axis=(2, 3))
                     for child in np.unique(groups)], -1)


def _tempered_softmax(layer, inputs, logits, temperature):
    """The couplings the router's coupling function gives for `logits`.

    The tempered softmax, or the function named by the router's
    `coupling` (sparsemax, entmax-1.5, sigmoid, Gumbel-softmax at
    inference) of `logits / temperature`.
    """
    groups = _child_groups(layer, inputs)
    if groups is None:
        return sparse_couplings_reference.coupling(
            layer.coupling, logits / temperature, _axis(layer),
            layer.gumbel_inference)
    couplings = np.zeros_like(logits)
    for child in np.unique(groups):
        rows = logits[:, :, groups == child] / temperature
        exp = np.exp(rows - rows.max(axis=(2, 3), keepdims=True))
        couplings[:, :, groups == child] = exp / exp.sum(
            axis=(2, 3), keepdims=True)
    return couplings


CASES = sorted(router_cases())


class RouterContractTest(TestCase):
    def test_every_router_is_found(self):
        self.assertContainsSubset(
            ["AttentionRouting", "DynamicRouting", "FCCaps", "HybridRouting",
             "InvertedAttentionRouting", "VectorRouting"],
            concrete_routers())
        for name in concrete_routers():
            self.assertIs(getattr(keras_caps.layers, name, None),
                          concrete_routers()[name], name)

    @parameterized.named_parameters((case, case) for case in CASES)
    def test_couplings_layout(self, case):
        layer, inputs = _make(case)
        outputs, couplings = layer(inputs, return_couplings=True)
        couplings = _numpy(couplings)
        expected_shape = layer.compute_couplings_shape(_shapes(inputs))
        self.assertEqual(couplings.shape, tuple(expected_shape))
        batch, _, children, parents = couplings.shape
        self.assertEqual(batch, _batch_size(inputs))
        self.assertEqual(parents, outputs.shape[-2])
        self.assertGreaterEqual(couplings.min(), 0.0)
        if layer.couplings_normalized:
            sums = _normalised_sums(layer, inputs, couplings)
            self.assertAllClose(sums, np.ones_like(sums), atol=2e-6)
        else:  # independent gates, e.g. coupling="sigmoid"
            self.assertLessEqual(couplings.max(), 1.0)
        self.assertAllClose(_numpy(layer(inputs)), _numpy(outputs))
        spec_outputs, spec_couplings = layer(_symbolic(inputs),
                                             return_couplings=True)
        self.assertEqual(tuple(spec_couplings.shape),
                         (None, *couplings.shape[1:]))
        self.assertEqual(tuple(spec_outputs.shape[1:]), outputs.shape[1:])

    @parameterized.named_parameters((case, case) for case in CASES)
    def test_routing_trace_is_the_coupling_of_its_agreement(self, case):
        layer, inputs = _make(case)
        layer.temperature = 0.5
        trace = layer.routing_trace(inputs)
        self.assertEqual(sorted(trace),
                         ["agreement", "couplings", "parents", "votes"])
        self.assertEqual(len(trace["couplings"]), len(trace["agreement"]))
        self.assertEqual(len(trace["couplings"]), len(trace["parents"]))
        for couplings, agreement in zip(trace["couplings"],
                                        trace["agreement"]):
            self.assertEqual(keras.backend.standardize_dtype(
                couplings.dtype), "float32")
            self.assertAllClose(
                _numpy(couplings),
                _tempered_softmax(layer, inputs, _numpy(agreement), 0.5),
                atol=1e-5)
        _, called = layer(inputs, return_couplings=True)
        self.assertAllClose(_numpy(trace["couplings"][-1]), _numpy(called),
                            atol=1e-6)
        self.assertAllClose(_numpy(trace["parents"][-1]),
                            _numpy(layer(inputs)), atol=1e-6)
        if trace["votes"] is not None:
            _, _, children, parents = called.shape
            self.assertEqual(tuple(trace["votes"].shape)[:3],
                             (_batch_size(inputs), children, parents))

    def test_routing_trace_needs_a_built_layer(self):
        with self.assertRaisesRegex(ValueError, "built `FCCaps`"):
            layers.FCCaps(3, 4).routing_trace(np.ones(CHILDREN_SHAPE))

    @parameterized.named_parameters((case, case) for case in CASES)
    def test_temperature_and_config_round_trip(self, case):
        layer, inputs = _make(case)
        layer.temperature = 0.25
        config = layer.get_config()
        self.assertEqual(config["temperature"], 0.25)
        self.assertEqual(type(layer).from_config(config).get_config(),
                         config)
        symbolic = _symbolic(inputs)
        model = keras.Model(symbolic, layer(symbolic))
        path = os.path.join(self.get_temp_dir(), f"{case}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        loaded_layer = loaded.layers[-1]
        self.assertIsInstance(loaded_layer, type(layer))
        self.assertEqual(loaded_layer.temperature, 0.25)
        self.assertAllClose(_numpy(loaded(inputs)), _numpy(layer(inputs)),
                            atol=1e-6)
        # Weight lists round-trip; one entry short (not a list from before
        # the temperature) is refused instead of loading shifted values.
        fresh = _make(case)[0]
        fresh.set_weights(layer.get_weights())
        self.assertEqual(fresh.temperature, 0.25)
        weights = layer.get_weights()
        short = [w for i, w in enumerate(weights) if i != 0]
        with self.assertRaises(ValueError):
            fresh.set_weights(short)

    @parameterized.named_parameters(
        (f"{case}_{policy}", case, policy) for case in CASES
        for policy in ("mixed_float16", "mixed_bfloat16"))
    def test_below_minimum_temperature_is_finite_in_low_precision(
            self, case, policy):
        layer, inputs = _make(case, dtype=policy)
        self.assertEqual(layer.temperature_variable.dtype, "float32")
        layer.temperature = layers.Router.MIN_TEMPERATURE
        _, at_minimum = layer(inputs, return_couplings=True)
        layer.temperature = 1e-9  # routes as MIN_TEMPERATURE
        outputs, couplings = layer(inputs, return_couplings=True)
        self.assertAllFinite(_numpy(outputs), f"outputs of {case}")
        self.assertAllFinite(_numpy(couplings), f"couplings of {case}")
        self.assertAllClose(_numpy(couplings), _numpy(at_minimum))
        _, gradients = value_and_gradients(layer, inputs)
        self.assertAllFinite(gradients, f"gradients of {case}")

    @parameterized.named_parameters((case, case) for case in CASES)
    def test_multiply_adds_positive_and_linear_in_children(self, case):
        # `Router.multiply_adds` from shapes: k times the children (the
        # children axis of vectors, the types axis of a capsule map) adds
        # the same count each time, so the count is a positive constant
        # plus a positive multiple of the children.
        layer, inputs = _make(case)
        shape = tuple(keras.tree.flatten(inputs)[0].shape)
        axis = 1 if len(shape) == 3 else 3

        def count(times):
            scaled = list(shape)
            scaled[axis] *= times
            if isinstance(inputs, (list, tuple)):  # [poses, activations]
                return layer.multiply_adds(
                    [tuple(scaled), tuple(scaled[:-1])])
            return layer.multiply_adds(tuple(scaled))

        counts = [count(times) for times in (1, 2, 3)]
        self.assertIsInstance(counts[0], int)
        self.assertGreater(counts[0], 0)
        self.assertGreater(counts[1] - counts[0], 0)
        self.assertEqual(counts[2] - counts[1], counts[1] - counts[0])
