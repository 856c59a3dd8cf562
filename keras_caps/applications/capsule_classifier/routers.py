"""The class-capsule layers `CapsuleClassifier` can end with, as data.

`ROUTERS` maps a router name to a `RouterChoice`: a factory that makes the layer
from the class count, the capsule size, the number of primary capsules and
the user's options, and what its outputs are (`OUTPUT_KINDS`), which says
how the capsule head gets capsules whose lengths, in [0, 1), are the class
scores of the margin loss:

- `"squashed"`: used as they are (`FCCaps`, `DynamicRouting` (also as
  `"uniform"`, one pass with uniform couplings: no routing),
  `HybridRouting`, `AttentionRouting`; and `EMRouting` and `SelfRouting`,
  whose vector outputs have the parent activation, in [0, 1], as their
  length).
- `"unsquashed"`: squashed by a `Squash` layer (the head of
  `VectorRouting`, with `normalize=False`, before the `"pose_score"` one;
  still built with `CapsuleClassifier(head="unsquashed")`).
- `"layer_norm"`: each output capsule is LayerNormed, so its norm is about
  `sqrt(capsule_dim)`, where the squash saturates (its slope at a norm of
  4 is e^-4); the capsules are scaled by `1 / sqrt(capsule_dim)` first
  (`InvertedAttentionRouting`). The LayerNorm's affine weights, shared by
  all capsules, are what makes lengths differ between classes; at
  initialisation (scale 1, offset 0) every class capsule has the same
  length, so the margin loss sends almost no gradient into the router
  (the head of `InvertedAttentionRouting` before the `"pose_score"` one;
  still built with `CapsuleClassifier(head="layer_norm")`).
- `"pose_score"`: each output capsule (a LayerNormed pose) is scored by a
  linear classifier shared by the classes, `score_j = w . pose_j + b` (one
  `Dense(1)`), as Tsai et al. (2020) read their class capsules' poses as
  logits; the class capsule is the pose's direction scaled to
  `sigmoid(score_j)`, so its length, in (0, 1), is the class score of the
  margin loss (`InvertedAttentionRouting`; and `VectorRouting`, whose
  outputs Heinsen (2022) reads as logits: with 1-D outputs, its final
  routing gives one logit per class).

Adding a router is one entry: a factory and a `RouterChoice(factory,
layer_class, outputs, description)` in `ROUTERS` (the layer itself is a
`keras_caps.layers.Router` subclass; `docs/adding-a-router.md`). Every name in
`ROUTERS` is then a `CapsuleClassifier(router=...)` and, under the same
name, a model of `keras_caps.applications.MODELS`: a `--model` of
`keras-caps train`, a `--routers` choice of `keras-caps compare` and a row
of the docs' model tables.
"""

import dataclasses
import inspect
from collections.abc import Callable

from keras_caps import layers

OUTPUT_KINDS = ("squashed", "unsquashed", "layer_norm", "pose_score")


@dataclasses.dataclass(frozen=True)
class RouterChoice:
    """How to make one kind of class-capsule layer.

    Attributes:
        factory: Callable `factory(num_capsules, capsule_dim, num_inputs,
            options, name)` returning the layer, which maps
            `(batch, num_inputs, input_dim)` capsules to
            `(batch, num_capsules, capsule_dim)`.
        layer_class: The layer's class, whose constructor arguments are the
            options a user may pass.
        outputs: str. One of `OUTPUT_KINDS`: `"squashed"`, `"unsquashed"`
            (the head squashes them), `"layer_norm"` (the head scales
            them by `1 / sqrt(capsule_dim)` and squashes them) or
            `"pose_score"` (the head scales each one's direction to the
            sigmoid of a linear score of it).
        description: str. One line for tables and help texts.
        other_outputs: tuple of str. Other `OUTPUT_KINDS` the head may read
            the layer's outputs as (`CapsuleClassifier(head=...)`), e.g.
            the head of models saved by earlier versions. Defaults to `()`.
    """

    factory: Callable
    layer_class: type
    outputs: str
    description: str
    other_outputs: tuple = ()

    def __post_init__(self):
        for kind in (self.outputs, *self.other_outputs):
            if kind not in OUTPUT_KINDS:
                raise ValueError(
                    "Unknown `outputs`. Expected one of "
                    f"{list(OUTPUT_KINDS)}. Received: outputs={kind!r}")

    @property
    def heads(self):
        """The `OUTPUT_KINDS` the head may read the outputs as, default
        first."""
        return (self.outputs, *self.other_outputs)

    def check_options(self, name, options):
        """Raises a `ValueError` for options the layer does not take."""
        if not isinstance(options, dict):
            raise TypeError(
                "Received an invalid type for `router_options`, expected a "
                f"dict. Received: router_options={options!r}")
        accepted = set()
        for cls in inspect.getmro(self.layer_class):
            # A router subclass passes its base's arguments on (kwargs).
            if issubclass(cls, layers.Router):
                accepted |= set(inspect.signature(cls.__init__).parameters)
        accepted -= {"self", "kwargs", "num_capsules", "capsule_dim",
                     "num_inputs"}
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValueError(
                f"Unknown `router_options` for router {name!r}: {unknown}. "
                f"Expected some of {sorted(accepted)}. Received: "
                f"router_options={options!r}")


def _self_attention(num_capsules, capsule_dim, num_inputs, options, name):
    return layers.FCCaps(num_capsules, capsule_dim, **options, name=name)


def _dynamic(num_capsules, capsule_dim, num_inputs, options, name):
    return layers.DynamicRouting(
        num_capsules, capsule_dim, **{"num_iterations": 3, **options},
        name=name)


# The options that would make `"uniform"` route: more iterations, or
# couplings other than the softmax of zero logits (1 / num_capsules each).
_ROUTING_OPTIONS = ("num_iterations", "coupling", "leaky",
                    "stop_inner_gradients")


def _uniform(num_capsules, capsule_dim, num_inputs, options, name):
    # No routing (Sabour et al. 2017, Procedure 1 with the couplings never
    # updated): one iteration of `DynamicRouting` is the softmax of zero
    # logits, c_ij = 1 / num_capsules, then v_j = squash(sum_i c_ij
    # u_hat_j|i) over the same votes u_hat_j|i = u_i W_ij; the agreement
    # update comes after the last iteration and is skipped.
    fixed = sorted(set(options) & set(_ROUTING_OPTIONS))
    if fixed:
        raise ValueError(
            f"Unknown `router_options` for router 'uniform': {fixed}. Its "
            "couplings are fixed at 1 / num_classes with one pass; use "
            "router='dynamic' to route. Received: "
            f"router_options={options!r}")
    return layers.DynamicRouting(num_capsules, capsule_dim,
                                 **{**options, "num_iterations": 1},
                                 name=name)


def _inverted_attention(num_capsules, capsule_dim, num_inputs, options,
                        name):
    # Vector poses: the primary capsules (8-D) and the class capsules
    # (16-D) differ in size, which matrix poses do not allow.
    return layers.InvertedAttentionRouting(
        num_capsules, capsule_dim, **{"pose": "vector", **options},
        name=name)


def _vector(num_capsules, capsule_dim, num_inputs, options, name):
    # Unnormalised outputs: with `normalize=True` (a LayerNorm without
    # affine weights) every class capsule has the same length. The head
    # reads a logit from each output with one linear map shared by the
    # classes ("pose_score"): as the M-step is linear in its weights, the
    # logit is what Heinsen's own 1-D outputs (logits) would be with the
    # vote kernel W_F2 w and biases B_F2[j] . w, plus a bias.
    return layers.VectorRouting(
        num_capsules, capsule_dim,
        **{"num_inputs": num_inputs, "normalize": False, **options},
        name=name)


def _hybrid(num_capsules, capsule_dim, num_inputs, options, name):
    return layers.HybridRouting(
        num_capsules, capsule_dim,
        **{"num_iterations": 3, "attention": "bilinear", **options},
        name=name)


def _attention(num_capsules, capsule_dim, num_inputs, options, name):
    return layers.AttentionRouting(num_capsules, capsule_dim, **options,
                                   name=name)


def _em(num_capsules, capsule_dim, num_inputs, options, name):
    # Vector capsules in (the stem's squashed primary capsules: their
    # lengths are the activations, the votes u_i W_ij), and per class the
    # direction of the mean vote scaled to the EM activation out, so the
    # capsule length is the class activation. The data rescaled by
    # parents / children (Gritzman 2019) and the inverse temperature 0.01
    # keep the activations off the logistic's flat ends at the start.
    return layers.EMRouting(
        num_capsules, capsule_dim,
        **{"input_kind": "vector", "output_kind": "vector",
           "data_scale": "auto", "inverse_temperatures": 0.01, **options},
        name=name)


def _self_routing(num_capsules, capsule_dim, num_inputs, options, name):
    # Vector capsules in (activation = length), and the parent pose scaled
    # to its activation out, so the capsule length is the activation.
    return layers.SelfRouting(
        num_capsules, capsule_dim,
        **{"input_format": "vectors", "output_format": "vectors",
           **options},
        name=name)


ROUTERS = {
    "self_attention": RouterChoice(
        _self_attention, layers.FCCaps, outputs="squashed",
        description="FCCaps self-attention routing (Efficient-CapsNet)"),
    "dynamic": RouterChoice(
        _dynamic, layers.DynamicRouting, outputs="squashed",
        description="dynamic routing by agreement, 3 iterations"),
    "uniform": RouterChoice(
        _uniform, layers.DynamicRouting, outputs="squashed",
        description="no routing (the control): the votes of `dynamic` "
        "averaged with uniform couplings 1/classes, one pass"),
    "inverted_attention": RouterChoice(
        _inverted_attention, layers.InvertedAttentionRouting,
        outputs="pose_score",
        description="inverted dot-product attention routing, 2 passes; "
        "lengths are the sigmoids of a linear score of each class pose",
        other_outputs=("layer_norm",)),
    "vector": RouterChoice(
        _vector, layers.VectorRouting, outputs="pose_score",
        description="Heinsen's vector routing, 2 iterations, unnormalised; "
        "lengths are the sigmoids of a linear score (logit) of each output",
        other_outputs=("unsquashed",)),
    "hybrid": RouterChoice(
        _hybrid, layers.HybridRouting, outputs="squashed",
        description="dynamic routing + bilinear attention term (learned "
        "lambda), 3 iterations"),
    "attention": RouterChoice(
        _attention, layers.AttentionRouting, outputs="squashed",
        description="query-key-value attention routing, 1 pass, 1 head"),
    "em": RouterChoice(
        _em, layers.EMRouting, outputs="squashed",
        description="EM routing (Hinton et al. 2018), 3 iterations; "
        "lengths are the EM activations"),
    "self_routing": RouterChoice(
        _self_routing, layers.SelfRouting, outputs="squashed",
        description="self-routing (Hahn et al. 2019), 1 pass; lengths are "
        "the activations"),
}
