"""`ModelFamily`, and adding a family exactly as the README's "Adding a model
family" says: presets, builder, family, registration; then train it."""

import csv
import json

import keras
import numpy as np
import pytest

from keras_caps import applications
from keras_caps import layers
from keras_caps import training
from keras_caps.applications import ModelFamily
from keras_caps.applications.capsule_head import capsule_head_model
from keras_caps.applications.decoders import dense_decoder
from keras_caps.applications.image_inputs import input_scaling_layer
from keras_caps.applications.presets import learning_rate_schedule
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

# Step 1: presets, one dict per dataset, with the keys the recipe reads.
TOY_PRESETS = {
    "mnist": {
        "input_shape": (28, 28, 1),
        "num_classes": 10,
        "num_objects": 1,
        "input_scaling": "rescale",
        "batch_size": 8,
        "epochs": 2,
        "learning_rate_schedule": "step_decay",
        "learning_rate": 1e-3,
        "learning_rate_decay": 0.5,
        "learning_rate_boundaries": (1,),
        "reconstruction_weight": 0.392,
        "dataset_options": {"augment": False},
    },
}


# Step 2: the builder: a stem, capsule layers, then the shared capsule head.
def ToyCapsNet(dataset="mnist", *, reconstruction=True,
               input_statistics=None, compile=True, optimizer="auto",
               jit_compile="auto", name="toy_capsnet"):
    preset = TOY.get_preset(dataset)
    images = keras.Input(preset["input_shape"], name="image")
    x = input_scaling_layer(preset, preset["input_shape"],
                            input_statistics)(images)
    x = keras.layers.Conv2D(8, 5, strides=3, activation="relu",
                            name="conv")(x)  # (b, 8, 8, 8)
    capsules = layers.PrimaryCaps(num_capsules=4, capsule_dim=2,
                                  kernel_size=8, name="primary_caps")(x)
    class_capsules = layers.FCCaps(preset["num_classes"], 4,
                                   name="digit_caps")(capsules)
    decoder = None
    if reconstruction:
        decoder = dense_decoder(preset["num_classes"] * 4,
                                preset["input_shape"])
    return capsule_head_model(images, class_capsules, decoder, preset, name,
                              compile=compile, optimizer=optimizer,
                              jit_compile=jit_compile)


# Step 3: the family, as data.
TOY = ModelFamily(name="ToyCapsNet", builder=ToyCapsNet, presets=TOY_PRESETS)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the training recipe and export need TensorFlow")
def test_a_new_family_trains_through_the_recipe(tmp_path, monkeypatch):
    # Step 4: registration under a command-line name.
    monkeypatch.setitem(
        applications.MODELS, "toy_capsnet",
        applications.RegisteredModel(TOY, "paper", "a toy CapsNet"))
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(80, seed=0),
                                 synthetic_digits(16, seed=1))
    record = training.train("toy_capsnet", "mnist",
                            output_dir=str(tmp_path / "run"),
                            data_dir=data_dir, steps_per_epoch=2, verbose=0)
    assert record["epochs"] == 2 and record["batch_size"] == 8
    assert record["dataset_options"] == {"augment": False}
    assert np.isfinite(record["test"]["loss"])
    with open(tmp_path / "run" / "history.csv") as file:
        rates = [float(row["learning_rate"])
                 for row in csv.DictReader(file)]
    np.testing.assert_allclose(rates, [1e-3, 5e-4], rtol=1e-6)
    model = keras.saving.load_model(str(tmp_path / "run" / "model.keras"))
    assert isinstance(model.get_layer("digit_caps"), layers.FCCaps)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["model"] == "toy_capsnet"


def test_every_registered_family_is_data():
    for name, entry in applications.MODELS.items():
        family = entry.family
        assert isinstance(family, ModelFamily), name
        for dataset in family.presets:
            preset = family.get_preset(dataset)
            assert {"batch_size", "epochs", "input_scaling",
                    "learning_rate_schedule"} <= set(preset), (name, dataset)
            family.learning_rate_schedule(dataset)  # Readable from data.


@pytest.mark.parametrize("preset, expected", [
    ({"learning_rate_schedule": "exponential_decay", "learning_rate": 1.0,
      "learning_rate_decay": 0.5, "min_learning_rate": 0.2},
     [1.0, 0.5, 0.25, 0.2, 0.2]),
    ({"learning_rate_schedule": "step_decay", "learning_rate": 1.0,
      "learning_rate_decay": 0.1, "learning_rate_boundaries": (2, 4)},
     [1.0, 1.0, 0.1, 0.1, 0.01]),
])
def test_learning_rate_schedules_from_preset_data(preset, expected):
    schedule = learning_rate_schedule(preset)
    np.testing.assert_allclose([schedule(epoch) for epoch in range(5)],
                               expected, rtol=1e-12)


def test_constant_and_unknown_schedules():
    assert learning_rate_schedule({"learning_rate_schedule": "constant",
                                   "learning_rate": 0.1}) is None
    with pytest.raises(ValueError, match="Unknown `learning_rate_schedule`"
                       ".*Received: learning_rate_schedule='cosine'"):
        learning_rate_schedule({"learning_rate_schedule": "cosine"})


def test_family_lookups_and_reconstruction_argument():
    assert TOY.dataset_options("mnist") == {"augment": False}
    assert applications.EFFICIENT_CAPSNET.dataset_options("mnist") == {}
    assert applications.EFFICIENT_CAPSNET.standardizes_input("smallnorb")
    assert not applications.EFFICIENT_CAPSNET.standardizes_input("mnist")
    with pytest.raises(ValueError, match="Unknown `dataset` for ToyCapsNet. "
                       "Expected one of \\['mnist'\\]. Received: "
                       "dataset='cifar10'"):
        TOY.get_preset("cifar10")
    with pytest.raises(ValueError, match="VectorRoutingCapsNet has no "
                       "reconstruction decoder"):
        applications.VECTOR_ROUTING_CAPSNET.build("mnist",
                                                  reconstruction=True)
    model = TOY.build("mnist", reconstruction=False, compile=False)
    assert model.output_shape == (None, 10)
    assert "label" in {layer.name for layer in TOY.build("mnist").layers}
