"""Costs in the comparison's records: per run from `metrics.json`, per
router over seeds, and in the evaluation record (hand-made records)."""

import keras
import pytest

from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison
from keras_caps.compare import comparison_results
from keras_caps.diagnostics.costs import cost_record


def _evaluation(multiply_adds=1000):
    record = {"trainable_parameters": 50,
              "clean": {"accuracy": 0.9, "macro_accuracy": 0.9,
                        "images_per_second": 100.0},
              "noise": {}, "pixels": {}, "occlusion": {}, "affine": None}
    if multiply_adds is not None:  # None: written by an earlier keras_caps
        record.update({"trainable_parameters_with_decoder": 80,
                       "decoder_parameters": 30,
                       "multiply_adds": multiply_adds,
                       "decoder_multiply_adds": 25})
    return record


def _run(router, seed, training_record, isolation="process",
         trained_before=False, multiply_adds=1000):
    return {"router": router, "seed": seed, "train_ms_per_step": 10.0,
            **comparison.run_costs(training_record, isolation,
                                    trained_before),
            "evaluation": _evaluation(multiply_adds)}


_SETTINGS = ComparisonSettings(
    ("dynamic", "cnn"), corruptions={"noise": [], "pixels": [],
                                     "occlusion": [], "affine": False})


@pytest.mark.single_backend
def test_run_costs_from_metrics_records():
    record = {"steady_ms_per_step": 12.5, "steady_steps": 40,
              "peak_memory_mb": 900.0}
    assert comparison.run_costs(record, "process", False) == {
        "steady_ms_per_step": 12.5, "steady_steps": 40,
        "peak_memory_mb": 900.0, "peak_memory_per_model": True}
    # Session isolation: the process held the models before it too.
    assert comparison.run_costs(record, "session", False)[
        "peak_memory_per_model"] is False
    # Trained by an earlier command: how is not known.
    assert comparison.run_costs(record, "process", True)[
        "peak_memory_per_model"] is None
    # A record of an earlier keras_caps: nothing invented.
    assert comparison.run_costs({}, "process", False) == {
        "steady_ms_per_step": None, "steady_steps": 0,
        "peak_memory_mb": None, "peak_memory_per_model": True}


@pytest.mark.single_backend
def test_aggregate_costs_over_seeds():
    runs = [
        _run("dynamic", 0, {"steady_ms_per_step": 10.0, "steady_steps": 9,
                            "peak_memory_mb": 700.0}),
        _run("dynamic", 1, {"steady_ms_per_step": 14.0, "steady_steps": 9,
                            "peak_memory_mb": 750.0}),
        # One seed without steady steps (a resumed run's last 2 steps),
        # one from an earlier keras_caps (no memory, no evaluation costs).
        _run("cnn", 0, {"steady_ms_per_step": None, "steady_steps": 0,
                        "peak_memory_mb": 600.0}, isolation="session"),
        _run("cnn", 1, {}, multiply_adds=None),
    ]
    routers = comparison_results.aggregate(runs, _SETTINGS)
    dynamic, cnn = routers["dynamic"], routers["cnn"]
    assert dynamic["steady_ms_per_step"] == 12.0
    assert dynamic["steady_speed_seeds"] == [0, 1]
    assert dynamic["peak_memory_mb"] == 750.0
    assert dynamic["peak_memory_per_model"] is True
    assert (dynamic["multiply_adds"], dynamic["decoder_multiply_adds"],
            dynamic["trainable_parameters_with_decoder"],
            dynamic["decoder_parameters"]) == (1000, 25, 80, 30)
    assert cnn["steady_ms_per_step"] is None
    assert cnn["steady_speed_seeds"] == []
    assert cnn["peak_memory_mb"] == 600.0
    assert cnn["peak_memory_per_model"] is False  # session isolation
    # The first seed's evaluation holds the counts.
    assert cnn["multiply_adds"] == 1000


@pytest.mark.single_backend
def test_evaluation_cost_record():
    images = keras.Input((6,))
    features = keras.layers.Dense(4, name="classifier")(images)
    decoder = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)],
                               name="decoder")
    model = keras.Model(images, [features, decoder(features)])
    # 6*4 + 4 = 28 parameters, 24 multiply-adds; decoder 4*3 + 3 = 15, 12.
    assert cost_record(model) == {
        "trainable_parameters_with_decoder": 43, "decoder_parameters": 15,
        "multiply_adds": 24, "decoder_multiply_adds": 12}


class _Unknown(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1],))

    def call(self, inputs):
        return inputs * self.kernel


@pytest.mark.single_backend
def test_evaluation_cost_record_of_an_uncountable_layer(caplog):
    images = keras.Input((6,))
    model = keras.Model(images, _Unknown(name="odd")(images))
    record = cost_record(model)
    # Not a silent zero: unknown, and the log names the layer.
    assert record["multiply_adds"] is None
    assert record["decoder_multiply_adds"] is None
    assert record["trainable_parameters_with_decoder"] == 6
    assert "'odd' (_Unknown)" in caplog.text
