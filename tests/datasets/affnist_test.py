"""The affNIST reader on small files written in the published format."""

import os

import numpy as np
import pytest

from keras_caps.datasets import affnist
from keras_caps.testing import write_affnist_file
from keras_caps.testing import write_affnist_test_set
from keras_caps.testing.affnist_files import affnist_columns


def _letter_l(value=255):
    """An asymmetric 40 x 40 image: an "L" (stroke down the left side, foot
    along the bottom, to the right) and a dot in the top-right corner."""
    image = np.zeros((40, 40), "uint8")
    image[2:31, 3] = value  # The stem: column 3, rows 2 to 30.
    image[30, 3:26] = value  # The foot: row 30, columns 3 to 25.
    image[5, 35] = 7  # The dot: row 5, column 35.
    return image


def _images(count, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (count, 40, 40)).astype("uint8")
    images[0] = _letter_l()
    return images, (np.arange(count) * 7 + 3) % 10


@pytest.fixture
def small_set(monkeypatch):
    # 32 batches of 2 images stand for the 32 of 10,000.
    monkeypatch.setattr(affnist, "TEST_IMAGES", 64)
    return _images(64)


def test_columns_follow_matlab_column_major_order():
    image = _letter_l()
    column = affnist_columns(image[None])[:, 0]
    # MATLAB's `reshape(column, 40, 40)` fills column by column (NumPy's
    # order="F"); its transpose is the image again.
    np.testing.assert_array_equal(column.reshape(40, 40, order="F").T,
                                  image)
    # Hand-worked: pixel (row r, column c) is entry 40 r + c.
    assert column[40 * 30 + 3] == 255 and column[40 * 3 + 30] == 0
    assert column[40 * 5 + 35] == 7


def test_batches_read_upright_and_in_order(tmp_path, small_set):
    images, labels = small_set
    folder = write_affnist_test_set(tmp_path, images, labels)
    read, read_labels = affnist.load_test_set(folder)
    assert read.shape == (64, 40, 40, 1) and read.dtype == np.uint8
    assert read_labels.dtype == np.int64
    np.testing.assert_array_equal(read[..., 0], images)
    np.testing.assert_array_equal(read_labels, labels)
    letter = read[0, ..., 0]
    # The "L" stands upright: its corner at the bottom left, the dot at
    # the top right, not mirrored along the diagonal.
    assert letter[30, 3] == 255 and letter[3, 30] == 0
    assert letter[5, 35] == 7 and letter[35, 5] == 0
    # The files in numeric order, not name order (10.mat after 9.mat).
    files = affnist.test_files(str(folder))
    assert [os.path.basename(path) for path in files[8:11]] == [
        "9.mat", "10.mat", "11.mat"]


def test_single_file_and_batch_folder_layouts(tmp_path, small_set):
    images, labels = small_set
    single = write_affnist_test_set(tmp_path / "single", images, labels,
                                    layout="single", compress=True)
    read, read_labels = affnist.load_test_set(single)
    np.testing.assert_array_equal(read[..., 0], images)
    np.testing.assert_array_equal(read_labels, labels)
    batches = write_affnist_test_set(tmp_path / "batches", images, labels)
    read, _ = affnist.load_test_set(batches / "test_batches")
    np.testing.assert_array_equal(read[..., 0], images)


def test_missing_batch_is_named(tmp_path, small_set):
    folder = write_affnist_test_set(tmp_path, *small_set)
    os.remove(folder / "test_batches" / "17.mat")
    with pytest.raises(ValueError, match=r"17\.mat' is missing.*1 of the"):
        affnist.test_files(folder)
    empty = _empty(tmp_path)
    with pytest.raises(ValueError, match="holds neither.*point"):
        affnist.test_files(empty)
    (empty / "test_batches.zip").write_bytes(b"PK")
    with pytest.raises(ValueError, match="extract test_batches.zip"):
        affnist.test_files(empty)
    with pytest.raises(ValueError, match="affnist_dir"):
        affnist.test_files(tmp_path / "no_such_folder")


def _empty(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("compress", [False, True])
def test_truncated_file_is_named(tmp_path, small_set, compress):
    folder = write_affnist_test_set(tmp_path, *small_set, compress=compress)
    path = folder / "test_batches" / "5.mat"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 40])
    with pytest.raises(ValueError, match=r"5\.mat' is truncated"):
        affnist.test_files(folder)
    with pytest.raises(ValueError, match=r"5\.mat' is truncated"):
        affnist.load_test_set(folder)
    path.write_bytes(data[:100])  # Cut inside the header.
    with pytest.raises(ValueError, match=r"5\.mat' is not a MATLAB 5"):
        affnist.test_files(folder)


def test_other_files_are_refused(tmp_path, small_set):
    images, labels = small_set
    hdf5 = tmp_path / "hdf5"
    hdf5.mkdir()
    (hdf5 / "test.mat").write_bytes(b"MATLAB 7.3 MAT-file" + bytes(200))
    with pytest.raises(ValueError, match="MATLAB 7.3"):
        affnist.test_files(hdf5)
    # The `just_centered` test set: 10,000 images, not 320,000 (here: 2
    # instead of the 64 the fixture stands for).
    # Uncompressed, refused before reading: 2 x 1600 bytes of pixels
    # cannot hold 64 images.
    centred = write_affnist_test_set(tmp_path / "centred", images[:2],
                                     labels[:2], layout="single")
    with pytest.raises(ValueError, match=r"test\.mat' is \d+ bytes, less "
                       r"than the 102400"):
        affnist.test_files(centred)
    # Compressed, refused once read.
    packed = write_affnist_test_set(tmp_path / "packed", images[:2],
                                    labels[:2], layout="single",
                                    compress=True)
    with pytest.raises(ValueError, match="hold 2 images, expected the 64"):
        affnist.load_test_set(packed)
    from scipy import io as scipy_io

    other = tmp_path / "other.mat"
    scipy_io.savemat(other, {"data": np.zeros((1600, 2))})
    with pytest.raises(ValueError, match="no struct 'affNISTdata'"):
        affnist.read_mat_file(str(other))


def test_bad_contents_are_named(tmp_path):
    path = str(tmp_path / "3.mat")
    write_affnist_file(path, np.zeros((2, 40, 40), "uint8"), [1, 12])
    with pytest.raises(ValueError, match=r"3\.mat' holds labels outside"):
        affnist.read_mat_file(path)
    from scipy import io as scipy_io

    scipy_io.savemat(path, {"affNISTdata": {
        "image": np.zeros((784, 2), "uint8"),
        "label_int": np.zeros((1, 2), "uint8")}})
    with pytest.raises(ValueError, match=r"shape \(784, 2\), expected"):
        affnist.read_mat_file(path)
