"""Keras callbacks for capsule networks.

- `RoutingTemperatureScheduler` (with a schedule of
  `keras_caps.schedules`, such as `ExponentialTemperatureDecay`): sets
  the routing temperature of the model's routers at each training step
  and logs it per epoch.
- `RoutingDiagnostics`: logs coupling entropy per head, top-3
  concentration and geometric agreement of the routing layers for a fixed
  batch at the end of each epoch, so `CSVLogger` and `TensorBoard` show
  head collapse or routing that never sharpens.
- `SpreadLossMarginSchedule`: raises the margin of a `SpreadLoss` from 0.2
  to 0.9 over training, once per epoch (matrix capsules with EM routing).
"""

from keras_caps.callbacks.routing_diagnostics import RoutingDiagnostics
from keras_caps.callbacks.routing_temperature_scheduler import (
    RoutingTemperatureScheduler,
)
from keras_caps.callbacks.spread_loss_margin_schedule import (
    SpreadLossMarginSchedule,
)
