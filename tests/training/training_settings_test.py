"""`TrainingSettings`: the checks of its fields, its record (the schema of
run.json) and how `train` routes its keyword arguments through it."""

import os

import pytest

from keras_caps import applications
from keras_caps import training
from keras_caps.training import TrainingSettings

# run.json's `settings` of an annealed CapsNet run, as keras_caps 0.2 (and
# earlier, before `TrainingSettings`) wrote it.
ANNEALED_RECORD = {
    "model": "capsnet", "dataset": "multi_mnist",
    "protocol": "test-as-validation (official)", "epochs": 3,
    "steps_per_epoch": None, "batch_size": 128, "precision": "float32",
    "seed": 7, "reconstruction": True, "deterministic": True,
    "dataset_options": {"augmentation": "shift", "shift": 4,
                        "partners_per_digit": 2},
    "routing_temperature": {"initial_temperature": 4.0, "decay_rate": 0.5,
                            "minimum_temperature": 0.5},
}


def test_an_older_record_reads_back_and_is_written_the_same():
    settings = TrainingSettings.from_record(ANNEALED_RECORD)
    assert settings == TrainingSettings(
        "capsnet", "multi_mnist", epochs=3, batch_size=128, seed=7,
        validation="test", reconstruction=True, deterministic=True,
        dataset_options={"augmentation": "shift", "shift": 4,
                         "partners_per_digit": 2},
        routing_temperature=4.0, temperature_decay=0.5, min_temperature=0.5)
    assert settings.resolve() == settings
    assert settings.to_record() == ANNEALED_RECORD


def test_resolve_takes_the_presets_defaults():
    resolved = TrainingSettings("capsnet", "mnist").resolve()
    preset = applications.MODELS["capsnet"].family.get_preset("mnist")
    assert (resolved.epochs, resolved.batch_size) == (preset["epochs"], 128)
    assert resolved.reconstruction is True
    assert resolved.dataset_options == {"augmentation": "shift"}
    assert "routing_temperature" not in resolved.to_record()
    annealed = TrainingSettings(routing_temperature=2.0,
                                temperature_decay=0.1).resolve()
    assert annealed.to_record()["routing_temperature"] == {
        "initial_temperature": 2.0, "decay_rate": 0.1,
        "minimum_temperature": 1.0}
    assert TrainingSettings.from_record(annealed.to_record()) == annealed


@pytest.mark.parametrize("fields, error, message", [
    ({"model": "capsnet2"}, ValueError, "Unknown `model`.*capsnet2"),
    ({"dataset": "cifar"}, ValueError, "Unknown `dataset`.*cifar"),
    ({"precision": "float8"}, ValueError, "Unknown `precision`"),
    ({"validation": "train"}, ValueError, "Unknown `validation`"),
    ({"epochs": 0}, ValueError, "`epochs`, expected a positive integer.*0"),
    ({"batch_size": "16"}, TypeError, "`batch_size`.*'16' of type str"),
    ({"steps_per_epoch": 2.5}, TypeError, "`steps_per_epoch`"),
    ({"seed": -1}, ValueError, r"`seed`, expected an integer in \[0, "),
    ({"seed": True}, TypeError, "`seed`.*of type bool"),
    ({"reconstruction": "yes"}, TypeError, "`reconstruction`.*bool"),
    ({"deterministic": None}, TypeError, "`deterministic`.*bool"),
    ({"dataset_options": [("shift", 2)]}, TypeError, "`dataset_options`"),
    ({"routing_temperature": 0.0}, ValueError, "`routing_temperature`"),
    ({"temperature_decay": -1.0}, ValueError, "`temperature_decay`"),
    ({"routing_temperature": 2.0, "min_temperature": 3.0}, ValueError,
     "`min_temperature`, expected at most `routing_temperature`"),
    # A schedule that would keep the temperature where it is (1, the
    # default floor) is refused, not recorded as an annealing.
    ({"temperature_decay": 0.1}, ValueError,
     "`routing_temperature`.*which is not set"),
    ({"min_temperature": 0.5}, ValueError,
     "`routing_temperature`.*which is not set"),
    ({"routing_temperature": 1.0, "temperature_decay": 0.1}, ValueError,
     "`temperature_decay` has no effect"),
    ({"routing_temperature": 0.5, "temperature_decay": 0.1,
      "min_temperature": 0.5}, ValueError,
     "`temperature_decay` has no effect"),
])
def test_bad_fields_are_clear_errors(fields, error, message):
    with pytest.raises(error, match=message):
        TrainingSettings(**fields)


@pytest.mark.parametrize("record, error, message", [
    ([], TypeError, "Expected a settings record"),
    ({**ANNEALED_RECORD, "learning_rate": 0.1}, ValueError,
     r"Unknown keys: \['learning_rate'\]; missing keys: \[\]"),
    ({key: value for key, value in ANNEALED_RECORD.items()
      if key != "seed"}, ValueError, r"missing keys: \['seed'\]"),
    ({**ANNEALED_RECORD, "protocol": "holdout"}, ValueError,
     "Unknown `protocol`"),
    ({**ANNEALED_RECORD, "routing_temperature": 4.0}, ValueError,
     "`routing_temperature` to be a temperature schedule's config"),
    ({**ANNEALED_RECORD, "epochs": -3}, ValueError, "`epochs`"),
])
def test_bad_records_are_clear_errors(record, error, message):
    with pytest.raises(error, match=message):
        TrainingSettings.from_record(record)


def test_train_routes_its_keyword_arguments_through_the_settings(tmp_path):
    output_dir = str(tmp_path / "run")
    with pytest.raises(ValueError, match="`epochs`"):
        training.train(output_dir=output_dir, epochs=0)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments "
                       r"\['learning_rate'\]"):
        training.train(output_dir=output_dir, learning_rate=0.1)
    with pytest.raises(TypeError, match=r"either `settings` or the "
                       r"settings' fields.*\['dataset', 'seed'\]"):
        training.train(dataset="mnist", output_dir=output_dir,
                       settings=TrainingSettings(), seed=1)
    with pytest.raises(TypeError, match="`settings` to be a "
                       "TrainingSettings"):
        training.train(output_dir=output_dir, settings={"seed": 1})
    assert not os.path.exists(output_dir)  # Refused before anything.


def test_a_decay_without_its_start_is_refused_before_anything(tmp_path,
                                                              capsys):
    from keras_caps import cli

    output_dir = tmp_path / "run"
    assert cli.main(["train", "--output-dir", str(output_dir),
                     "--temperature-decay", "0.01"]) == 2
    error = capsys.readouterr().err
    assert "--routing-temperature" in error and "not set" in error
    assert not output_dir.exists()
