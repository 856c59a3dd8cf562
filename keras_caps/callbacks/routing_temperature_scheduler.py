"""Sets the routing temperature of a model's routers at each training step."""

import math
import numbers

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.diagnostics.router_search import find_routers

LOG_NAME = "routing_temperature"


@keras_caps_export("keras_caps.callbacks.RoutingTemperatureScheduler")
class RoutingTemperatureScheduler(keras.callbacks.Callback):
    """Anneals the routing temperature of a model during training.

    Before each training step `t` (counted from the optimizer's
    iterations, so a resumed run continues its schedule) the callback sets
    the temperature of every routing layer of the model to `schedule(t)`:
    every layer with a routing temperature (`DynamicRouting`, `FCCaps`,
    `InvertedAttentionRouting`, `VectorRouting`, `AttentionRouting`), also
    inside nested models and `InvertedAttentionRoutingStack`, or only the
    layers named in `layer_names`. The temperature is a non-trainable
    variable, so the compiled training step is not retraced; the model
    saved after training keeps the last temperature.

    At the end of each epoch the temperature of the last step is written
    to the logs as `routing_temperature`: put this callback before
    `CSVLogger` and `TensorBoard` in the callback list, and they record it
    (as they do `learning_rate` after a `LearningRateScheduler`).

    On the JAX backend Keras keeps the model's state outside its variables
    during an epoch; the callback writes that state back before each
    change of temperature (`model.jax_state_sync()`), so the next step
    sees the new value. This costs one pass over the variables on the
    steps where the temperature changes.

    Args:
        schedule: callable. `schedule(step) -> float`, the temperature at
            training step `step` (an int from 0); for example an
            `ExponentialTemperatureDecay`. A value that is not a finite
            number above 0 stops training with a `ValueError` naming the
            step.
        layer_names: list of str, or `None`. Names of the routing layers
            to anneal (found at any depth). Defaults to `None`: every
            routing layer.
        verbose: int. `1` prints the temperature at the start of each
            epoch. Defaults to `0`.

    Example:

    >>> inputs = keras.Input((8, 4))
    >>> outputs = keras_caps.layers.DynamicRouting(3, 4)(inputs)
    >>> model = keras.Model(inputs, outputs)
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> schedule = keras_caps.schedules.ExponentialTemperatureDecay(
    ...     initial_temperature=4.0, decay_rate=0.5)
    >>> history = model.fit(
    ...     np.ones((4, 8, 4)), np.zeros((4, 3, 4)), batch_size=2,
    ...     epochs=1, verbose=0,
    ...     callbacks=[keras_caps.callbacks.RoutingTemperatureScheduler(
    ...         schedule)])
    >>> round(model.layers[-1].temperature, 4)  # schedule(1): the last step
    2.4261
    >>> round(history.history["routing_temperature"][0], 4)
    2.4261
    """

    def __init__(self, schedule, layer_names=None, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(
                "Received an invalid type for `schedule`, expected a "
                "callable `schedule(step) -> float`. Received: "
                f"schedule={schedule!r} of type {type(schedule).__name__}")
        if layer_names is not None:
            if isinstance(layer_names, str) or not isinstance(
                    layer_names, (list, tuple)) or not all(
                    isinstance(name, str) for name in layer_names):
                raise TypeError(
                    "Received an invalid type for `layer_names`, expected "
                    "a list of layer names or `None`. Received: "
                    f"layer_names={layer_names!r}")
            layer_names = list(layer_names)
        self.schedule = schedule
        self.layer_names = layer_names
        self.verbose = verbose
        self._layers = None
        self._epoch_start_step = 0
        self._temperature = None

    def on_train_begin(self, logs=None):
        self._layers = self._routing_layers()
        self._temperature = None

    def on_epoch_begin(self, epoch, logs=None):
        # The optimizer's step count is current here on every backend
        # (JAX writes its state back at the end of each epoch), and after
        # `BackupAndRestore` restored it.
        self._epoch_start_step = int(ops.convert_to_numpy(
            self.model.optimizer.iterations))
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: routing temperature "
                  f"{self._checked(self._epoch_start_step):.6g}.")

    def on_train_batch_begin(self, batch, logs=None):
        step = self._epoch_start_step + batch
        temperature = self._checked(step)
        if temperature == self._temperature:
            return
        if keras.backend.backend() == "jax" and hasattr(
                self.model, "jax_state_sync"):
            # Write the epoch's state back to the variables: the trainer
            # then reads the variables, new temperature included, again.
            self.model.jax_state_sync()
        for layer in self._layers:
            layer.temperature = temperature
        self._temperature = temperature

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self._temperature is not None:
            logs[LOG_NAME] = self._temperature

    def get_config(self):
        """The arguments; the schedule serialized as a Keras object.

        A registered schedule (such as `ExponentialTemperatureDecay`)
        round-trips through `from_config`; a plain function is stored by
        name, as Keras stores functions.
        """
        return {"schedule": keras.saving.serialize_keras_object(
                    self.schedule),
                "layer_names": self.layer_names,
                "verbose": self.verbose}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["schedule"] = keras.saving.deserialize_keras_object(
            config["schedule"])
        return cls(**config)

    def _checked(self, step):
        value = self.schedule(step)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                "The routing temperature `schedule` must return a number. "
                f"Received: schedule({step})={value!r} of type "
                f"{type(value).__name__}")
        value = float(value)
        if not math.isfinite(value) or value <= 0.0:
            raise ValueError(
                "The routing temperature `schedule` must return a finite "
                f"number above 0. Received: schedule({step})={value!r} at "
                f"step {step}")
        return value

    def _routing_layers(self):
        """The routing layers to anneal, found at any depth of the model."""
        layers = find_routers(self.model)
        if self.layer_names is not None:
            by_name = {layer.name: layer for layer in layers}
            missing = [name for name in self.layer_names
                       if name not in by_name]
            if missing:
                raise ValueError(
                    "Received an invalid value for `layer_names`: no routing "
                    f"layer (one of {sorted(by_name)}) is named {missing}. "
                    f"Received: layer_names={self.layer_names!r}")
            layers = [by_name[name] for name in self.layer_names]
        if not layers:
            raise ValueError(
                f"`{type(self).__name__}` found no routing layer with a "
                "temperature in the model. Received: model="
                f"{self.model.name!r}")
        return layers
