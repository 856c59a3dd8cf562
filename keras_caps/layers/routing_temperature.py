"""The routing temperature of the softmax routers, held as layer state."""

import keras
from keras import ops

from keras_caps.ops import capsule_ops
from keras_caps.validation import check_temperature

_SMALLEST_TEMPERATURE = 1e-30


class RoutingTemperature:
    """Mixin for routing layers whose couplings are a softmax of logits.

    The couplings become `softmax(logits / temperature)`: a temperature
    above 1 spreads the routing, one below 1 sharpens it towards hard
    assignments, and 1 (the default) leaves every output exactly as without
    a temperature. The value lives in a non-trainable float32 variable, so
    a callback can change it while `model.fit` runs without retracing the
    training function, and it is saved with the model.

    A layer using the mixin calls `_init_temperature(temperature)` in
    `__init__`, `_build_temperature()` as the last weight of `build`, and
    `_tempered_softmax(logits, axis)` for its couplings, and adds
    `"temperature"` to its config. Files saved before the layer had a
    temperature load with the temperature at its initial value.
    """

    def _init_temperature(self, temperature):
        self._initial_temperature = check_temperature(
            "temperature", temperature)
        self._temperature = None

    def _build_temperature(self):
        self._temperature = self.add_weight(
            name="temperature", shape=(),
            initializer=keras.initializers.Constant(
                self._initial_temperature),
            dtype="float32", trainable=False, autocast=False)

    @property
    def temperature(self):
        """The current routing temperature, a Python float."""
        if self._temperature is None:
            return self._initial_temperature
        return float(ops.convert_to_numpy(self._temperature))

    @temperature.setter
    def temperature(self, value):
        value = check_temperature("temperature", value)
        if self._temperature is None:
            self._initial_temperature = value
        else:
            self._temperature.assign(value)

    @property
    def temperature_variable(self):
        """The float32 variable holding the temperature (after `build`)."""
        return self._temperature

    def _tempered_softmax(self, logits, axis):
        """`softmax(logits / temperature)` over `axis`, in float32.

        The logits are shifted by their maximum before the division, so a
        tiny temperature gives one-hot couplings instead of `inf - inf`.
        With temperature 1 this equals `softmax(logits)` exactly.
        """
        logits = capsule_ops.at_least_float32(logits)
        shift = ops.stop_gradient(ops.max(logits, axis=axis, keepdims=True))
        return ops.softmax(self._temper(logits - shift), axis=axis)

    def _temper(self, shifted_logits):
        """`shifted_logits / temperature`, for logits shifted to be <= 0.

        For routers that write their own (e.g. masked) softmax; pass
        float32 logits from which their maximum was subtracted.
        """
        # A temperature set to 0 through `set_weights` gives hard routing.
        temperature = ops.maximum(self._temperature, _SMALLEST_TEMPERATURE)
        return shifted_logits / ops.cast(temperature, shifted_logits.dtype)

    def set_weights(self, weights):
        """As `Layer.set_weights`; a list without the temperature keeps it.

        Weight lists taken from the layer before it had a temperature (one
        entry short: the temperature is the last of the layer's own
        weights, before those of its sublayers) still load.
        """
        own_weights = self.weights
        if (self._temperature is not None
                and len(weights) == len(own_weights) - 1):
            index = [id(weight) for weight in own_weights].index(
                id(self._temperature))
            weights = list(weights)
            weights.insert(index, ops.convert_to_numpy(self._temperature))
        super().set_weights(weights)

    def load_own_variables(self, store):
        own_variables = self._trainable_variables + (
            self._non_trainable_variables)
        if (self._temperature is not None
                and len(store.keys()) == len(own_variables) - 1
                and own_variables[-1] is self._temperature):
            # Saved before the layer had a temperature: every other
            # variable is in the file, in the same order.
            for index, variable in enumerate(own_variables[:-1]):
                variable.assign(store[f"{index}"])
            self._temperature.assign(self._initial_temperature)
            return
        super().load_own_variables(store)
