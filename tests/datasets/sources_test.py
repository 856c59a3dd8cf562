import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_caps.datasets import sources
from tests.datasets import fixtures


@pytest.mark.parametrize("name", ["mnist", "smallnorb"])
def test_missing_tfds_data_fails_fast(tmp_path, name):
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        sources.load_tfds(name, "train", data_dir=str(tmp_path))
    assert time.monotonic() - start < 30.0  # no download, no network wait
    message = str(error.value)
    for hint in ("data_dir", "--data-dir", "KERAS_CAPS_DATA_DIR",
                 "train-images-idx3-ubyte.gz", name):
        assert hint in message


def test_resolve_data_dir(monkeypatch, tmp_path):
    assert sources.resolve_data_dir(None) is None
    assert sources.resolve_data_dir(tmp_path) == str(tmp_path)
    monkeypatch.setenv(sources.DATA_DIR_ENV, "/somewhere")
    assert sources.resolve_data_dir(None) == "/somewhere"
    assert sources.resolve_data_dir(tmp_path) == str(tmp_path)


def test_image_arrays_from_idx_files(tmp_path):
    expected = fixtures.write_idx_dataset(tmp_path / "fashion_mnist",
                                          num_train=20, num_test=10)
    arrays = sources.load_image_arrays("fashion_mnist", tmp_path)
    np.testing.assert_array_equal(arrays["test"][0], expected["test"][0])


def test_image_arrays_from_tfds():
    with tfds.testing.mock_data(num_examples=12):
        arrays = sources.load_image_arrays("mnist")
    for split in ("train", "test"):
        images, labels = arrays[split]
        assert images.shape == (12, 28, 28) and images.dtype == np.uint8
        assert labels.shape == (12,) and labels.dtype == np.int64


def test_missing_files_mention_the_subfolder(tmp_path):
    fixtures.write_idx_dataset(tmp_path / "mnist", num_train=10, num_test=10)
    with pytest.raises(ValueError, match="fashion_mnist' subfolder"):
        sources.load_image_arrays("fashion_mnist", tmp_path)
