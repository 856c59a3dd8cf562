"""The module of `ExponentialTemperatureDecay` before `keras_caps.schedules`.

Kept so that imports of this path keep working; the class lives in
`keras_caps.schedules.exponential_temperature_decay`.
"""

from keras_caps.schedules.exponential_temperature_decay import (  # noqa: F401
    ExponentialTemperatureDecay,
)
