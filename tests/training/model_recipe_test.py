import tempfile

import pytest
import tensorflow as tf

from keras_caps import cli
from keras_caps import datasets
from keras_caps import training
from keras_caps.applications import MODELS
from keras_caps.applications import CapsNet
from keras_caps.applications import EfficientCapsNet


class _StopAfterLoad(Exception):
    pass


def _loader_options(monkeypatch, model, dataset, **train_kwargs):
    """The options `train` passes to `datasets.load` for each split."""
    calls = {}

    def fake_load(name, split, **kwargs):
        calls[split] = kwargs
        if len(calls) == 3:
            raise _StopAfterLoad
        return tf.data.Dataset.range(1)

    monkeypatch.setattr(datasets, "load", fake_load)
    # `train` claims its output folder (run.json) before loading data.
    monkeypatch.chdir(tempfile.mkdtemp())
    with pytest.raises(_StopAfterLoad):
        training.train(model, dataset, output_dir="unused", **train_kwargs)
    return calls


def test_registry_knows_capsnet():
    assert MODELS["capsnet"].family.builder is CapsNet
    assert MODELS["efficient_capsnet"].family.builder is EfficientCapsNet
    assert MODELS["efficient_capsnet"].family.dataset_options("mnist") == {}
    assert MODELS["capsnet"].family.get_preset("mnist")["batch_size"] == 128
    args = cli.build_parser().parse_args(
        ["train", "--model", "capsnet", "--dataset", "multi_mnist"])
    assert (args.model, args.dataset) == ("capsnet", "multi_mnist")


def test_capsnet_recipe_passes_its_augmentation(monkeypatch):
    calls = _loader_options(monkeypatch, "capsnet", "mnist")
    assert set(calls) == {"train", "validation", "test"}
    for kwargs in calls.values():
        assert kwargs["augmentation"] == "shift"
        assert kwargs["batch_size"] == 128


def test_user_options_override_the_recipe(monkeypatch):
    calls = _loader_options(
        monkeypatch, "capsnet", "multi_mnist", batch_size=8,
        dataset_options={"partners_per_digit": 3, "shift": 2})
    assert calls["test"]["shift"] == 2
    assert calls["test"]["partners_per_digit"] == 3
    calls = _loader_options(monkeypatch, "capsnet", "multi_mnist",
                            batch_size=8)
    assert calls["train"]["shift"] == 4


def test_efficient_capsnet_keeps_the_loader_defaults(monkeypatch):
    calls = _loader_options(monkeypatch, "efficient_capsnet", "mnist")
    assert "augmentation" not in calls["train"]
    assert calls["train"]["batch_size"] == 16


def test_capsnet_has_no_smallnorb_preset():
    with pytest.raises(ValueError, match="Unknown `dataset` for CapsNet"):
        training.train("capsnet", "smallnorb", output_dir="unused")
