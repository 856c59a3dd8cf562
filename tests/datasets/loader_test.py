import dataclasses

import numpy as np
import pytest

import keras_caps.datasets
from keras_caps.datasets import DATASETS
from keras_caps.datasets import DatasetInfo
from keras_caps.datasets import load
from tests.datasets import fixtures


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    fixtures.write_idx_dataset(folder, num_train=100, num_test=30)
    return str(folder)


def test_datasets_presets():
    assert sorted(DATASETS) == ["cifar10", "cifar100", "fashion_mnist",
                                "mnist", "mnist_canvas", "multi_mnist",
                                "smallnorb"]
    assert DATASETS["mnist"] == DatasetInfo(
        (28, 28, 1), 10, 60000, 6000, 10000, tfds_name="mnist",
        idx_folder="mnist", augmentations=("efficient_capsnet", "shift"),
        numpy_pipeline=True)
    # Where each dataset's files come from, and which pipelines run it.
    assert {name: (info.tfds_name, info.idx_folder, info.numpy_pipeline)
            for name, info in DATASETS.items()} == {
        "mnist": ("mnist", "mnist", True),
        "mnist_canvas": ("mnist", "mnist", False),
        "fashion_mnist": ("fashion_mnist", "fashion_mnist", True),
        "multi_mnist": ("mnist", "mnist", True),
        "smallnorb": ("smallnorb", None, False),
        "cifar10": ("cifar10", None, False),
        "cifar100": ("cifar100", None, False)}
    assert DATASETS["smallnorb"].input_shape == (48, 48, 2)
    assert DATASETS["smallnorb"].num_classes == 5
    assert DATASETS["smallnorb"].num_validation == 2430
    assert DATASETS["multi_mnist"].input_shape == (36, 36, 1)
    for info in DATASETS.values():
        assert info.num_validation * 10 == info.num_train
    with pytest.raises(dataclasses.FrozenInstanceError):
        DATASETS["mnist"].num_classes = 3


def test_unknown_dataset_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        load("svhn", "train", batch_size=8)
    for name in DATASETS:
        assert name in str(error.value)
    assert "svhn" in str(error.value)


def test_unknown_option(data_dir):
    with pytest.raises(ValueError, match="partners_per_digit"):
        load("mnist", "train", batch_size=8, data_dir=data_dir,
             partners_per_digit=3)


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist",
                                     "multi_mnist"])
def test_dispatch_matches_the_presets(data_dir, dataset):
    info = DATASETS[dataset]
    ds = load(dataset, "train", batch_size=4, data_dir=data_dir,
              pairs_per_epoch=8) if dataset == "multi_mnist" else load(
                  dataset, "train", batch_size=4, data_dir=data_dir)
    inputs, targets = ds.element_spec
    assert tuple(inputs["image"].shape) == (4, *info.input_shape)
    assert targets["length"].shape[-1] == info.num_classes


def test_same_as_the_module_loader(data_dir):
    from_load = next(load("mnist", "train", batch_size=4, data_dir=data_dir,
                          seed=5).as_numpy_iterator())
    direct = next(keras_caps.datasets.mnist.load(
        "train", batch_size=4, data_dir=data_dir, seed=5).as_numpy_iterator())
    np.testing.assert_array_equal(from_load[0]["image"],
                                  direct[0]["image"])


@pytest.mark.parametrize("dataset", sorted(DATASETS))
@pytest.mark.parametrize("download", [True, False])
def test_download_reaches_tfds(monkeypatch, dataset, download):
    from keras_caps.datasets import sources

    seen = []

    def fake_load_tfds(name, split, data_dir=None, download=True, **kwargs):
        seen.append((name, download))
        raise RuntimeError("stop after recording the download flag")

    monkeypatch.setattr(sources, "load_tfds", fake_load_tfds)
    with pytest.raises(RuntimeError, match="stop after"):
        load(dataset, "train", batch_size=2, download=download)
    # MultiMNIST and the canvas digits are made from the MNIST digits.
    tfds_name = ("mnist" if dataset in ("multi_mnist", "mnist_canvas")
                 else dataset)
    assert seen == [(tfds_name, download)]
    if dataset == "smallnorb":
        with pytest.raises(RuntimeError, match="stop after"):
            keras_caps.datasets.training_statistics(dataset,
                                                    download=download)
        assert seen[1:] == [(tfds_name, download)]


def test_download_must_be_a_bool(data_dir):
    with pytest.raises(TypeError, match="`download`, expected a bool"):
        load("mnist", "test", batch_size=2, data_dir=data_dir,
             download="no")
