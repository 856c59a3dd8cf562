import csv
import math
import os

import keras
import numpy as np

from keras_caps.callbacks import RoutingTemperatureScheduler
from keras_caps.layers import DynamicRouting
from keras_caps.layers import FCCaps
from keras_caps.layers import InvertedAttentionRouting
from keras_caps.layers import InvertedAttentionRoutingStack
from keras_caps.schedules import ExponentialTemperatureDecay
from keras_caps.testing import TestCase
from tests.layers import reference

NUM_SAMPLES, BATCH_SIZE, EPOCHS = 8, 2, 2
STEPS_PER_EPOCH = NUM_SAMPLES // BATCH_SIZE


class _TraceCounter(keras.layers.Layer):
    """Identity that counts how often its `call` is traced (or run)."""

    traces = 0

    def call(self, inputs):
        type(self).traces += 1
        return inputs


class _BatchLosses(keras.callbacks.Callback):
    """Records the logged loss after every training step."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def _couplings_model(rng):
    """Inputs -> FCCaps couplings, with fixed weights (learning rate 0).

    The loss `mean(couplings ** 2)` is then a function of the routing
    temperature alone, which the NumPy reference predicts.
    """
    inputs = keras.Input((6, 4))
    routing = FCCaps(3, 5, name="routing")
    _, couplings = routing(_TraceCounter()(inputs), return_couplings=True)
    model = keras.Model(inputs, couplings)
    kernel = (rng.normal(size=(3, 6, 4, 5)) * 0.5).astype("float32")
    prior = (rng.normal(size=(3, 6, 1)) * 0.1).astype("float32")
    routing.kernel.assign(kernel)
    routing.prior.assign(prior)
    routing.prior.trainable = False  # after the couplings: no gradient
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0),
                  loss="mse")
    return model, kernel, prior


class RoutingTemperatureSchedulerTest(TestCase):
    def test_anneals_during_fit_without_retracing(self):
        rng = np.random.default_rng(0)
        model, kernel, prior = _couplings_model(rng)
        x = rng.normal(size=(NUM_SAMPLES, 6, 4)).astype("float32")
        y = np.zeros((NUM_SAMPLES, 1, 6, 3), dtype="float32")
        schedule = ExponentialTemperatureDecay(8.0, 0.5, 0.1)
        log_path = os.path.join(self.get_temp_dir(), "history.csv")
        losses = _BatchLosses()
        # The traces of a plain `fit` (TensorFlow: 1, the training step;
        # JAX: 2, the symbolic build and the jitted step) ...
        plain = _couplings_model(np.random.default_rng(9))[0]
        _TraceCounter.traces = 0
        plain.fit(x, y, batch_size=BATCH_SIZE, epochs=EPOCHS, verbose=0)
        plain_traces = _TraceCounter.traces
        _TraceCounter.traces = 0
        model.fit(x, y, batch_size=BATCH_SIZE, epochs=EPOCHS, shuffle=False,
                  verbose=0,
                  callbacks=[RoutingTemperatureScheduler(schedule), losses,
                             keras.callbacks.CSVLogger(log_path)])
        # ... are all there is for the 8 temperatures: no retracing.
        # (PyTorch runs eagerly: there every step is a call, and the counts
        # are equal because the temperature adds none.)
        self.assertEqual(_TraceCounter.traces, plain_traces)
        if keras.backend.backend() in ("tensorflow", "jax"):
            self.assertLessEqual(plain_traces, 2)
        if keras.backend.backend() == "tensorflow":
            self.assertEqual(plain_traces, 1)

        # Every step ran at its scheduled temperature: the logged loss is
        # the epoch's running mean of the reference's per-step losses.
        expected = []
        for epoch in range(EPOCHS):
            step_losses = []
            for batch in range(STEPS_PER_EPOCH):
                step = epoch * STEPS_PER_EPOCH + batch
                rows = slice(batch * BATCH_SIZE, (batch + 1) * BATCH_SIZE)
                _, couplings = reference.fc_caps(
                    x[rows].astype("float64"), kernel, prior, 5,
                    schedule(step))
                step_losses.append(np.mean(couplings ** 2))
                expected.append(np.mean(step_losses))
        self.assertAllClose(losses.losses, expected, rtol=1e-4, atol=1e-6)
        # Guards the test: the temperature moves the loss.
        self.assertGreater(abs(expected[-1] - expected[0]), 1e-2)

        # The epoch logs (CSV) carry the temperature of each epoch's last
        # step.
        with open(log_path) as file:
            rows = list(csv.DictReader(file))
        self.assertEqual(len(rows), EPOCHS)
        for epoch, row in enumerate(rows):
            last_step = (epoch + 1) * STEPS_PER_EPOCH - 1
            self.assertAllClose(float(row["routing_temperature"]),
                                schedule(last_step), rtol=1e-6)

        # The saved model keeps the last temperature.
        final = schedule(EPOCHS * STEPS_PER_EPOCH - 1)
        self.assertAllClose(model.get_layer("routing").temperature, final,
                            rtol=1e-6)
        path = os.path.join(self.get_temp_dir(), "annealed.keras")
        model.save(path)
        loaded = keras.saving.load_model(
            path, custom_objects={"_TraceCounter": _TraceCounter})
        self.assertAllClose(loaded.get_layer("routing").temperature, final,
                            rtol=1e-6)

    def test_resumed_training_continues_the_schedule(self):
        rng = np.random.default_rng(1)
        model, _, _ = _couplings_model(rng)
        x = rng.normal(size=(NUM_SAMPLES, 6, 4)).astype("float32")
        y = np.zeros((NUM_SAMPLES, 1, 6, 3), dtype="float32")
        steps = []

        def schedule(step):
            steps.append(step)
            return 1.0 + step

        callback = RoutingTemperatureScheduler(schedule)
        for _ in range(2):
            model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, shuffle=False,
                      verbose=0, callbacks=[callback])
        self.assertEqual(steps, list(range(2 * STEPS_PER_EPOCH)))
        self.assertEqual(model.get_layer("routing").temperature,
                         2.0 * STEPS_PER_EPOCH)

    def test_finds_nested_routers_and_named_layers(self):
        inputs = keras.Input((5, 4))
        inner_inputs = keras.Input((5, 4))
        inner = keras.Model(inner_inputs,
                            DynamicRouting(3, 4, name="inner")(inner_inputs),
                            name="nested")
        stack = InvertedAttentionRoutingStack(
            [InvertedAttentionRouting(3, 4, name="stacked")], name="stack")
        outputs = keras.layers.Add()(
            [inner(inputs), stack(inputs),
             FCCaps(3, 4, name="outer")(inputs)])
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss="mse")
        x = np.ones((4, 5, 4), dtype="float32")
        y = np.zeros((4, 3, 4), dtype="float32")
        model.fit(x, y, batch_size=4, epochs=1, verbose=0,
                  callbacks=[RoutingTemperatureScheduler(lambda step: 0.5)])
        layers = {"outer": model.get_layer("outer"),
                  "inner": inner.get_layer("inner"),
                  "stacked": stack.layers[0]}
        for name, layer in layers.items():
            self.assertEqual(layer.temperature, 0.5, name)
        model.fit(x, y, batch_size=4, epochs=1, verbose=0,
                  callbacks=[RoutingTemperatureScheduler(
                      lambda step: 2.0, layer_names=["stacked", "outer"])])
        self.assertEqual(layers["inner"].temperature, 0.5)
        self.assertEqual(layers["stacked"].temperature, 2.0)
        self.assertEqual(layers["outer"].temperature, 2.0)

    def test_config_round_trip(self):
        callback = RoutingTemperatureScheduler(
            ExponentialTemperatureDecay(4.0, 0.2, 0.5),
            layer_names=["routing"])
        restored = RoutingTemperatureScheduler.from_config(
            callback.get_config())
        self.assertEqual(restored.layer_names, ["routing"])
        self.assertIsInstance(restored.schedule, ExponentialTemperatureDecay)
        self.assertEqual(restored.schedule(3), callback.schedule(3))

    def test_bad_schedules_and_layers(self):
        rng = np.random.default_rng(2)
        model, _, _ = _couplings_model(rng)
        x = rng.normal(size=(NUM_SAMPLES, 6, 4)).astype("float32")
        y = np.zeros((NUM_SAMPLES, 1, 6, 3), dtype="float32")

        def fit(callback):
            model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, verbose=0,
                      callbacks=[callback])

        for value, error in ((0.0, ValueError), (-1.0, ValueError),
                             (math.nan, ValueError), (math.inf, ValueError),
                             ("1.0", TypeError), (True, TypeError)):
            # Good for two steps, then bad: the error names step 2.
            callback = RoutingTemperatureScheduler(
                lambda step, value=value: 1.0 if step < 2 else value)
            with self.assertRaisesRegex(error, r"schedule\(2\)=.*"):
                fit(callback)
        with self.assertRaisesRegex(TypeError, "`schedule`.*Received"):
            RoutingTemperatureScheduler(0.5)
        with self.assertRaisesRegex(TypeError, "`layer_names`.*Received"):
            RoutingTemperatureScheduler(lambda step: 1.0,
                                        layer_names="routing")
        with self.assertRaisesRegex(ValueError,
                                    r"`layer_names`.*\['missing'\]"):
            fit(RoutingTemperatureScheduler(lambda step: 1.0,
                                            layer_names=["missing"]))
        inputs = keras.Input((3,))
        plain = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        plain.compile(optimizer="sgd", loss="mse")
        with self.assertRaisesRegex(ValueError, "no routing layer"):
            plain.fit(np.ones((2, 3)), np.ones((2, 2)), verbose=0,
                      callbacks=[RoutingTemperatureScheduler(
                          lambda step: 1.0)])
