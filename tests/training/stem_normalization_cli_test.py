"""`keras-caps train --stem-normalization`: the stem's normalisation of the
models that have the option, recorded with the run."""

import json
import os

import keras
import pytest

from keras_caps import cli
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

pytestmark = pytest.mark.single_backend


def _normalizations(model):
    return sorted({type(layer).__name__ for layer in model.layers
                   if "Normalization" in type(layer).__name__})


def test_train_builds_a_groupnorm_stem_and_records_it(tmp_path, capsys):
    images, labels = synthetic_digits(32, seed=0)
    data_dir = write_idx_dataset(str(tmp_path / "mnist"), (images, labels),
                                 (images[:8], labels[:8]))
    output_dir = str(tmp_path / "run")
    status = cli.main([
        "train", "--model", "cnn", "--data-dir", data_dir,
        "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "8",
        "--stem-normalization", "group", "--output-dir", output_dir])
    assert status == 0, capsys.readouterr().err
    with open(os.path.join(output_dir, "run.json")) as file:
        assert json.load(file)["settings"]["stem_normalization"] == "group"
    model = keras.saving.load_model(os.path.join(output_dir, "model.keras"))
    # Four stem convolutions, each followed by a GroupNormalization and no
    # BatchNormalization anywhere.
    assert _normalizations(model) == ["GroupNormalization"]
    assert sum(isinstance(layer, keras.layers.GroupNormalization)
               for layer in model.layers) == 4
    with open(os.path.join(output_dir, "metrics.json")) as file:
        assert 0.0 <= json.load(file)["test"]["accuracy"] <= 1.0


def test_a_model_without_the_option_is_refused(tmp_path, capsys):
    status = cli.main(["train", "--model", "efficient_capsnet",
                       "--stem-normalization", "group", "--output-dir",
                       str(tmp_path / "run")])
    assert status == 2
    err = capsys.readouterr().err
    assert "has no `stem_normalization` option" in err
    assert "stem_normalization='group'" in err
    assert not os.path.exists(tmp_path / "run")


def test_an_unknown_normalization_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--stem-normalization", "layer"])
    assert exit_info.value.code == 2
    assert "--stem-normalization" in capsys.readouterr().err
