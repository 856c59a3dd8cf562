"""Keras callbacks for capsule networks.

- `RoutingDiagnostics`: logs coupling entropy per head, top-3
  concentration and geometric agreement of the routing layers for a fixed
  batch at the end of each epoch, so `CSVLogger` and `TensorBoard` show
  head collapse or routing that never sharpens.
"""

from keras_caps.callbacks.routing_diagnostics import RoutingDiagnostics
