import gzip
import os

import numpy as np
import pytest

from keras_caps.datasets import idx
from tests.datasets import fixtures


def test_reads_the_four_files(tmp_path):
    expected = fixtures.write_idx_dataset(tmp_path, num_train=30,
                                          num_test=20)
    arrays = idx.read_idx_dataset(tmp_path)
    assert sorted(arrays) == ["test", "train"]
    for split in ("train", "test"):
        images, labels = arrays[split]
        assert images.dtype == np.uint8 and images.shape[1:] == (28, 28)
        assert labels.dtype == np.int64
        np.testing.assert_array_equal(images, expected[split][0])
        np.testing.assert_array_equal(labels, expected[split][1])


def test_reads_uncompressed_files(tmp_path):
    expected = fixtures.write_idx_dataset(tmp_path, num_train=10,
                                          num_test=10, compress=False)
    images, _ = idx.read_idx_dataset(str(tmp_path))["train"]
    np.testing.assert_array_equal(images, expected["train"][0])


def test_missing_file_lists_expected_files(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    os.remove(tmp_path / "t10k-labels-idx1-ubyte.gz")
    with pytest.raises(ValueError) as error:
        idx.read_idx_dataset(tmp_path)
    message = str(error.value)
    assert "t10k-labels-idx1-ubyte.gz" in message
    for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        assert name in message
    assert "KERAS_CAPS_DATA_DIR" in message


def test_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="Missing IDX file"):
        idx.read_idx_dataset(tmp_path / "nowhere")


def test_wrong_magic_number(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    images, _ = fixtures.synthetic_digits(10)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    fixtures.write_file(path, fixtures.idx_bytes(images, 2049))
    with pytest.raises(ValueError, match="magic number") as error:
        idx.read_idx_dataset(tmp_path)
    assert "train-images-idx3-ubyte.gz" in str(error.value)
    assert "2051" in str(error.value)


def test_labels_file_with_image_magic(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    fixtures.write_file(path, fixtures.idx_bytes(np.zeros(10, np.uint8),
                                                 2051))
    with pytest.raises(ValueError, match="t10k-labels.*magic number"):
        idx.read_idx_dataset(tmp_path)


def test_truncated_payload(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    images, _ = fixtures.synthetic_digits(10)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    fixtures.write_file(path, fixtures.idx_bytes(images, 2051)[:-100])
    with pytest.raises(ValueError, match="truncated") as error:
        idx.read_idx_dataset(tmp_path)
    assert "train-images-idx3-ubyte.gz" in str(error.value)


def test_truncated_header(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    fixtures.write_file(tmp_path / "train-labels-idx1-ubyte.gz", b"\x00\x00")
    with pytest.raises(ValueError, match="truncated"):
        idx.read_idx_dataset(tmp_path)


def test_broken_gzip(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])  # a cut download
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz"):
        idx.read_idx_dataset(tmp_path)


def test_label_count_mismatch(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    fixtures.write_file(tmp_path / "train-labels-idx1-ubyte.gz",
                        fixtures.idx_bytes(np.zeros(9, np.uint8), 2049))
    with pytest.raises(ValueError, match="10 images but .* 9 labels"):
        idx.read_idx_dataset(tmp_path)


def test_label_out_of_range(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    fixtures.write_file(tmp_path / "t10k-labels-idx1-ubyte.gz",
                        fixtures.idx_bytes(np.full(10, 12, np.uint8), 2049))
    with pytest.raises(ValueError, match="labels outside"):
        idx.read_idx_dataset(tmp_path)


def test_wrong_image_size(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    fixtures.write_file(tmp_path / "train-images-idx3-ubyte.gz",
                        fixtures.idx_bytes(np.zeros((10, 32, 32), np.uint8),
                                           2051))
    with pytest.raises(ValueError, match=r"size \(32, 32\)"):
        idx.read_idx_dataset(tmp_path)


def test_gzip_payload_is_checked_not_the_file_size(tmp_path):
    # A valid gzip stream holding a truncated payload is still truncated.
    fixtures.write_idx_dataset(tmp_path, num_train=10, num_test=10)
    labels = fixtures.idx_bytes(np.zeros(10, np.uint8), 2049)[:-3]
    with gzip.open(tmp_path / "train-labels-idx1-ubyte.gz", "wb") as file:
        file.write(labels)
    with pytest.raises(ValueError, match="truncated"):
        idx.read_idx_dataset(tmp_path)
