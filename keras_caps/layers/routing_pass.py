"""What a router's maths returns: its outputs and its routing passes."""

import dataclasses
from typing import Any


@dataclasses.dataclass
class RoutingPasses:
    """The result of `Router.compute_routing`.

    Attributes:
        outputs: The parent capsules, of the layer's output shape.
        couplings: A list with one float32 `(batch, heads, children,
            parents)` tensor per kept routing pass (the last one when the
            router was not asked to keep every pass).
        agreement: A list, parallel to `couplings`, with the logits each
            pass's tempered softmax normalised, same layout (zeros for a
            uniform pass).
        parents: A list with each kept pass's outputs (defaults to
            `[outputs]`).
        votes: What each child proposes to each parent, `(batch, children,
            parents, dim)`, or `None` where the router has no such votes.
        extras: Router-specific results (e.g. `VectorRouting`'s credit).

    Example:

    >>> passes = keras_caps.layers.RoutingPasses(
    ...     outputs=np.zeros((1, 2, 4)), couplings=[np.ones((1, 1, 3, 2))],
    ...     agreement=[np.zeros((1, 1, 3, 2))])
    >>> sorted(passes.as_trace())
    ['agreement', 'couplings', 'parents', 'votes']
    """

    outputs: Any
    couplings: list
    agreement: list
    parents: list = None
    votes: Any = None
    extras: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if len(self.couplings) != len(self.agreement):
            raise ValueError(
                "`couplings` and `agreement` need one entry per pass each. "
                f"Received: {len(self.couplings)} couplings and "
                f"{len(self.agreement)} agreements")
        if self.parents is None:
            self.parents = [self.outputs]

    def as_trace(self):
        """The dict `Router.routing_trace` returns."""
        return {"couplings": list(self.couplings),
                "agreement": list(self.agreement),
                "parents": list(self.parents), "votes": self.votes}


# Public, but plain data (not a Keras object to serialize or register).
RoutingPasses._keras_caps_api_path = "keras_caps.layers.RoutingPasses"
