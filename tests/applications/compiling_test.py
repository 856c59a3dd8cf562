"""The builders' precision handling: loss scaling and the float16-on-CPU
warning (GPUs keep float16 as it is)."""

import warnings

import keras
import pytest

from keras_caps import applications
from keras_caps import training
from keras_caps.applications import compiling
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

BUILDERS = {
    # Builders that compile through the shared capsule head, and one that
    # resolves its optimizer itself.
    "efficient_capsnet": lambda: applications.EfficientCapsNet(
        "mnist", input_shape=(16, 16, 1)),
    "vector_routing_capsnet": lambda: applications.VectorRoutingCapsNet(
        "mnist", input_shape=(16, 16, 1)),
}


@pytest.fixture
def policy():
    previous = keras.config.dtype_policy()
    yield keras.config.set_dtype_policy
    keras.config.set_dtype_policy(previous)


def _without_accelerator(monkeypatch, available=False):
    monkeypatch.setattr(compiling, "_accelerator_available",
                        lambda: available)


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_float16_without_accelerator_warns_and_keeps_float16(
        builder, policy, monkeypatch):
    _without_accelerator(monkeypatch)
    policy("mixed_float16")
    with pytest.warns(UserWarning, match="mixed_float16.*without a GPU") as (
            record):
        model = BUILDERS[builder]()
    message = str(record[0].message)
    assert "mixed_bfloat16" in message and "--precision" in message
    # A warning, not a fallback: the model is the float16 one asked for.
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert "mixed_float16" in {layer.dtype_policy.name
                               for layer in model.layers}


@pytest.mark.parametrize("precision, available", [
    ("mixed_float16", True),     # A GPU: float16 untouched, no warning.
    ("mixed_bfloat16", False),
    ("float32", False),
])
def test_no_warning_where_the_precision_is_fast(precision, available,
                                                policy, monkeypatch):
    _without_accelerator(monkeypatch, available)
    policy(precision)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Overrides pyproject's ignore.
        model = BUILDERS["efficient_capsnet"]()
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) \
        == (precision == "mixed_float16")


@pytest.mark.parametrize("devices, expected", [
    (["cpu:0"], False),
    (["gpu:0", "gpu:1"], True),
    (["tpu:0"], True),
])
def test_accelerator_detection_reads_the_backend_devices(devices, expected,
                                                         monkeypatch):
    if keras.backend.backend() not in ("tensorflow", "jax"):
        pytest.skip("keras.distribution.list_devices is for TF and JAX")
    monkeypatch.setattr(keras.distribution, "list_devices",
                        lambda device_type=None: devices)
    assert compiling._accelerator_available() is expected


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the training recipe and export need TensorFlow")
def test_keras_caps_train_warns_on_float16_without_accelerator(
        tmp_path, monkeypatch):
    """What a CPU user of `keras-caps train --precision mixed_float16` sees.

    One step at batch 4: float16 is slow on CPUs, so this test trains as
    little as a training run can.
    """
    _without_accelerator(monkeypatch)
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40, seed=0),
                                 synthetic_digits(4, seed=1))
    with pytest.warns(UserWarning, match="--precision mixed_bfloat16"):
        record = training.train(
            "efficient_capsnet", "mnist", output_dir=str(tmp_path / "run"),
            epochs=1, batch_size=4, steps_per_epoch=1,
            precision="mixed_float16", data_dir=data_dir, verbose=0)
    assert record["precision"] == "mixed_float16"
