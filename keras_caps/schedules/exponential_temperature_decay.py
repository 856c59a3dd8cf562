"""An exponentially decaying routing temperature, with a floor."""

import math

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_number
from keras_caps.validation import check_temperature


@keras_caps_export("keras_caps.schedules.ExponentialTemperatureDecay")
class ExponentialTemperatureDecay:
    """Routing temperature schedule `max(minimum, initial * exp(-rate * t))`.

    The annealing of attention-based routing: a high temperature spreads
    the couplings early in training (exploration), and the temperature
    decays with the training step `t` towards hard routing, down to a
    floor that keeps it from vanishing:

    ```
    temperature(t) = max(minimum_temperature,
                         initial_temperature * exp(-decay_rate * t))
    ```

    Pass it to `RoutingTemperatureScheduler`. It is serializable
    (`keras.saving.serialize_keras_object`).

    Args:
        initial_temperature: float. `tau_0`, the temperature at step 0,
            finite and above 0.
        decay_rate: float. `lambda`, the decay per training step, finite
            and at least 0 (`0` keeps the temperature constant).
        minimum_temperature: float. The floor, finite, above 0 and at most
            `initial_temperature`. Defaults to `1.0`, plain routing.

    Example:

    >>> schedule = keras_caps.schedules.ExponentialTemperatureDecay(
    ...     initial_temperature=10.0, decay_rate=0.01)
    >>> round(schedule(0), 3), round(schedule(100), 3), schedule(1000)
    (10.0, 3.679, 1.0)
    """

    def __init__(self, initial_temperature, decay_rate,
                 minimum_temperature=1.0):
        initial_temperature = check_temperature("initial_temperature",
                                                initial_temperature)
        decay_rate = check_number("decay_rate", decay_rate, minimum=0.0)
        if not math.isfinite(decay_rate):
            raise ValueError(
                "Received an invalid value for `decay_rate`, expected a "
                f"finite number of at least 0. Received: "
                f"decay_rate={decay_rate!r}")
        minimum_temperature = check_temperature("minimum_temperature",
                                                minimum_temperature)
        if minimum_temperature > initial_temperature:
            raise ValueError(
                "Received an invalid value for `minimum_temperature`, "
                "expected at most `initial_temperature` "
                f"({initial_temperature!r}). Received: "
                f"minimum_temperature={minimum_temperature!r}")
        self.initial_temperature = initial_temperature
        self.decay_rate = decay_rate
        self.minimum_temperature = minimum_temperature

    def __call__(self, step):
        """The temperature at training step `step` (an int from 0)."""
        # exp(-x) underflows to 0 for huge steps: the floor takes over.
        decayed = self.initial_temperature * math.exp(
            -self.decay_rate * float(step))
        return max(self.minimum_temperature, decayed)

    def get_config(self):
        return {"initial_temperature": self.initial_temperature,
                "decay_rate": self.decay_rate,
                "minimum_temperature": self.minimum_temperature}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
