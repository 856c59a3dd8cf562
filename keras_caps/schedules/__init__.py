"""Schedules of routing hyper-parameters over training steps.

As Keras keeps learning-rate schedules in `keras.optimizers.schedules`,
apart from the callbacks that apply them, keras_caps keeps its schedules
here; `keras_caps.callbacks.RoutingTemperatureScheduler` applies one.

- `ExponentialTemperatureDecay`: `max(minimum, initial * exp(-rate * t))`,
  the annealing of the routing temperature.
"""

from keras_caps.schedules.exponential_temperature_decay import (
    ExponentialTemperatureDecay,
)
