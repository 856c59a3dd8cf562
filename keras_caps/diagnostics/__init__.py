"""Numbers about routing: which layers route, and how sharply.

Backend-agnostic (no TensorFlow, no matplotlib): the training callback
`keras_caps.callbacks.RoutingDiagnostics` and the figures of
`keras_caps.visualization` both read them.

- `find_routers`: the `Router` layers of a model, at any depth.
- `routing_diagnostics`: coupling entropy per head, top-3 concentration
  and geometric agreement per pass, from couplings (and votes).
- `routing_layer_diagnostics`: the same for every router of a model on a
  batch, through each router's `routing_trace`.
- `count_multiply_adds`, `count_parameters`: a model's inference
  multiply–adds and trainable parameters, decoder apart, from shapes.
"""

from keras_caps.diagnostics.costs import count_multiply_adds
from keras_caps.diagnostics.costs import count_parameters
from keras_caps.diagnostics.router_search import find_routers
from keras_caps.diagnostics.routing_layer_diagnostics import diagnosable_routers
from keras_caps.diagnostics.routing_layer_diagnostics import (
    routing_layer_diagnostics,
)
from keras_caps.diagnostics.routing_statistics import routing_diagnostics
