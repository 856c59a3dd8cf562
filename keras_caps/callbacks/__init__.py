"""Keras callbacks for capsule networks."""

from keras_caps.callbacks.exponential_temperature_decay import (
    ExponentialTemperatureDecay,
)
from keras_caps.callbacks.routing_temperature_scheduler import (
    RoutingTemperatureScheduler,
)
