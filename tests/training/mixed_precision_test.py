"""Mixed precision end to end for every application of `keras-caps train`.

Fast (always run): each model of `MODELS` trains two steps under
`mixed_float16` (with Keras' dynamic loss scaling, which `compile` adds) and
`mixed_bfloat16` on random images: finite losses, float32 weights, float32
class scores. With real MNIST in `KERAS_CAPS_DATA_DIR` (CI sets it): the
same short `keras-caps train` run in float32 and both mixed policies
reaches a test accuracy within `ACCURACY_MARGIN` of float32's; in CI for
EfficientCapsNet, `large` for the other MNIST models.
"""

import os

import keras
import numpy as np
import pytest

from keras_caps import training
from keras_caps.training import MODELS

MIXED = ("mixed_float16", "mixed_bfloat16")
# Same seed, data order and steps; only the arithmetic differs. After 400
# steps the float32 runs are at 94-98 %, and run-to-run differences from
# round-off stay within a couple of points.
ACCURACY_MARGIN = 0.03
_CANDIDATE_DATASETS = ("mnist", "cifar10", "smallnorb")


def _dataset_for(recipe):
    for dataset in _CANDIDATE_DATASETS:
        try:
            recipe.get_preset(dataset)
        except (ValueError, KeyError):
            continue
        return dataset
    pytest.skip("no preset for any of " + ", ".join(_CANDIDATE_DATASETS))


@pytest.fixture
def policy():
    previous = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(previous)


@pytest.mark.parametrize("precision", MIXED)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_short_training_is_finite_with_float32_weights(name, precision,
                                                       policy):
    recipe = MODELS[name]
    keras.config.set_dtype_policy(precision)
    keras.utils.set_random_seed(0)
    model = recipe.builder(_dataset_for(recipe))
    shape = tuple(model.inputs[0].shape[1:])
    classes = keras.tree.flatten(model.output)[0].shape[-1]
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (8, *shape)).astype("float32")
    labels = np.eye(classes, dtype="float32")[rng.integers(0, classes, 8)]
    if "label" in {layer.name for layer in model.layers}:
        x = {"image": images, "label": labels}
        y = {"length": labels, "reconstruction": images / 255.0}
    else:
        x, y = images, labels
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all(), history.history
    assert {w.dtype for w in model.weights} == {"float32"}
    if precision == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    scores = model.predict(x, verbose=0)
    scores = scores["length"] if isinstance(scores, dict) else scores
    assert scores.dtype == np.float32
    assert np.isfinite(scores).all()


# EfficientCapsNet, the main job, runs in CI (about 3 minutes on 2 CPU
# cores, most of it mixed_float16, which CPUs run slowly); the other MNIST
# models are `large`.
@pytest.mark.skipif(not os.environ.get("KERAS_CAPS_DATA_DIR"),
                    reason="needs the real MNIST files in KERAS_CAPS_DATA_DIR "
                    "(a folder with an mnist/ subfolder)")
@pytest.mark.parametrize("name", [
    name if name == "efficient_capsnet"
    else pytest.param(name, marks=pytest.mark.large)
    for name, recipe in sorted(MODELS.items())
    if _dataset_for(recipe) == "mnist"])
def test_mixed_precision_accuracy_matches_float32_on_real_mnist(name,
                                                                 tmp_path):
    accuracy = {}
    for precision in ("float32", *MIXED):
        record = training.train(
            name, "mnist", output_dir=str(tmp_path / precision), epochs=1,
            batch_size=32, steps_per_epoch=400, precision=precision,
            validation="test", verbose=0)
        assert np.isfinite(record["test"]["loss"]), record
        accuracy[precision] = max(
            value for key, value in record["test"].items()
            if key.endswith("accuracy"))
        model = keras.saving.load_model(str(tmp_path / precision /
                                            "model.keras"))
        assert {w.dtype for w in model.weights} == {"float32"}
    assert accuracy["float32"] > 0.9, accuracy
    for precision in MIXED:
        assert abs(accuracy[precision] - accuracy["float32"]) <= (
            ACCURACY_MARGIN), accuracy
