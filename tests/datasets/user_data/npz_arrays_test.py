import json

import numpy as np
import pytest

from keras_caps.datasets.user_data import image_memory
from keras_caps.datasets.user_data import npz_arrays

pytestmark = pytest.mark.single_backend


def write(tmp_path, **arrays):
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return str(path)


def valid(num_train=6, num_test=4, shape=(8, 8)):
    rng = np.random.default_rng(0)
    return {
        "x_train": rng.integers(0, 256, (num_train, *shape)).astype("uint8"),
        "y_train": np.arange(num_train) % 3,
        "x_test": rng.integers(0, 256, (num_test, *shape)).astype("uint8"),
        "y_test": np.arange(num_test) % 3}


def test_reads_both_splits_and_adds_a_channel(tmp_path):
    arrays = valid()
    data = npz_arrays.read_npz_arrays(write(tmp_path, **arrays))
    np.testing.assert_array_equal(data.train[0][..., 0], arrays["x_train"])
    np.testing.assert_array_equal(data.train[1], arrays["y_train"])
    np.testing.assert_array_equal(data.test[0][..., 0], arrays["x_test"])
    assert data.test[1].dtype == np.int64
    assert data.class_names == ("0", "1", "2")
    assert len(data.source["sha256"]) == 64


def test_class_names_and_unit_floats(tmp_path):
    arrays = valid(shape=(4, 4, 3))
    unit = arrays["x_train"] / 255.0
    path = write(tmp_path, **{**arrays, "x_train": unit},
                 class_names=np.array(["ant", "bee", "cat", "dog"]))
    data = npz_arrays.read_npz_arrays(path)
    np.testing.assert_array_equal(data.train[0], arrays["x_train"])
    assert data.class_names == ("ant", "bee", "cat", "dog")
    assert data.source["scaled_from_unit_range"]


def test_converts_size_and_colour(tmp_path):
    arrays = valid(shape=(8, 8, 3))
    arrays["x_train"][:] = 90
    data = npz_arrays.read_npz_arrays(write(tmp_path, **arrays),
                                      image_size=(4, 4),
                                      color_mode="grayscale")
    assert data.train[0].shape == (6, 4, 4, 1)
    np.testing.assert_array_equal(data.train[0], 90)


@pytest.mark.parametrize("change, message", [
    ({"y_test": None}, r"lacks the arrays \['y_test'\]"),
    ({"y_train": np.arange(5) % 3}, "differ in length: 6 images, 5"),
    ({"y_train": np.array([0, 1, 2, 0, 1, -1])}, "y_train.*from 0"),
    ({"y_train": np.linspace(0, 1, 6)}, "y_train.*integer class ids"),
    ({"x_train": np.zeros((6, 8, 8, 2))}, "x_train.*1 or 3 channels"),
    ({"x_train": np.zeros((6, 8))}, r"x_train.*Received shape \(6, 8\)"),
    ({"x_test": np.full((4, 8, 8), 300.0)}, r"x_test.*\[0, 255\]"),
    ({"x_test": np.zeros((4, 9, 9))}, "different shapes"),
    ({"class_names": np.array(["a", "b"])}, "go up to 2.*2 names"),
    ({"y_train": np.zeros(6, "int64"), "y_test": np.zeros(4, "int64")},
     "one class only"),
])
def test_bad_arrays_name_the_key(tmp_path, change, message):
    arrays = {**valid(), **change}
    arrays = {key: value for key, value in arrays.items()
              if value is not None}
    with pytest.raises(ValueError, match=message):
        npz_arrays.read_npz_arrays(write(tmp_path, **arrays))


def test_not_an_npz_file(tmp_path):
    path = tmp_path / "data.npz"
    path.write_text("hello")
    with pytest.raises(ValueError, match="Cannot read .* as a NumPy .npz"):
        npz_arrays.read_npz_arrays(str(path))
    with pytest.raises(ValueError, match="`dataset`: no file"):
        npz_arrays.read_npz_arrays(str(tmp_path / "missing.npz"))


def test_float_images_give_a_json_record(tmp_path):
    # Floats in [0, 255] and in [0, 1] are documented; the source record
    # goes into run.json, so it holds JSON types only.
    for scale, scaled in ((1.0, False), (1 / 255.0, True)):
        arrays = valid()
        arrays["x_train"] = arrays["x_train"] * scale
        data = npz_arrays.read_npz_arrays(write(tmp_path, **arrays))
        assert data.source["scaled_from_unit_range"] is scaled
        assert json.loads(json.dumps(data.source)) == data.source


@pytest.mark.parametrize("labels", [
    np.array([0, 1, 2, 0, 1, 1e20]),
    np.array([0, 1, 2, 0, 1, 2**64 - 1], np.uint64),
])
def test_labels_that_overflow_a_class_id_are_refused(tmp_path, labels):
    # Cast to int64 first, they became negative ids and trained with
    # all-zero targets.
    with pytest.raises(ValueError, match=r"y_train.*class ids up to "
                       r"2147483647"):
        npz_arrays.read_npz_arrays(write(tmp_path,
                                         **{**valid(), "y_train": labels}))


@pytest.mark.parametrize("change, message", [
    # One stray label: 997 classes without a training image.
    ({"y_train": np.array([0, 1, 2, 0, 1, 1000])},
     r"go up to 1000, but 997 of the classes 0-1000 have no training "
     r"image \(the first: \[3, 4, 5, 6, 7\]\)"),
    # A test label beside the training ones: a class nothing trains.
    ({"y_test": np.array([0, 1, 2, 5])},
     r"go up to 5, but 3 of the classes 0-5 have no training image \(the "
     r"first: \[3, 4, 5\]\)"),
])
def test_stray_labels_without_class_names_are_refused(tmp_path, change,
                                                      message):
    with pytest.raises(ValueError, match=message):
        npz_arrays.read_npz_arrays(write(tmp_path, **{**valid(), **change}))


def test_other_files_given_as_npz_are_named(tmp_path):
    npy = tmp_path / "images.npy"
    np.save(npy, np.zeros((2, 8, 8), "uint8"))
    with pytest.raises(ValueError, match=r"it is a \.npy file of one array"
                       r".*numpy\.savez"):
        npz_arrays.read_npz_arrays(str(npy))
    text = tmp_path / "labels.npz"
    text.write_text("0,1,2\n")
    with pytest.raises(ValueError, match="it is not a zip archive"):
        npz_arrays.read_npz_arrays(str(text))
    # Object arrays need pickle, which runs code: refused without NumPy's
    # advice to allow it.
    pickled = write(tmp_path, **{**valid(),
                                 "class_names": np.array([1, "b", None])})
    with pytest.raises(ValueError, match="pickled") as raised:
        npz_arrays.read_npz_arrays(pickled)
    assert "allow_pickle" not in str(raised.value)


def test_the_memory_check_reads_the_headers_before_decompressing(
        tmp_path, monkeypatch):
    # 8 MB of zeros compress to a few kB: the file is small, its arrays
    # are not. They are refused from the archive's headers; decompressing
    # first reached the memory it then refused.
    path = tmp_path / "data.npz"
    np.savez_compressed(path, **{**valid(), "x_train": np.zeros(
        (1000, 32, 32, 1))})
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(image_memory, "available_memory_bytes",
                        lambda: 4_000_000)

    def no_decompression(*args, **kwargs):
        raise AssertionError("decompressed before the memory check")

    monkeypatch.setattr(npz_arrays.np, "load", no_decompression)
    with pytest.raises(ValueError, match=r"npz:.*do not fit in memory: "
                       r"they take 8 MiB uncompressed"):
        npz_arrays.read_npz_arrays(str(path))


@pytest.mark.parametrize("change, message", [
    # Refused when the file is read, before a run records anything (it
    # was refused after run.json, and the fixed file then as changed
    # data).
    ({"class_names": np.array(["a", "b", "a"])},
     r"class_names of .* names a class twice: \['a'\]"),
    # An empty test split was blamed on the 10 % holdout.
    ({"x_test": np.zeros((0, 8, 8), "uint8"),
      "y_test": np.zeros(0, "int64")}, r"x_test of .* holds no images"),
])
def test_refused_when_read(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        npz_arrays.read_npz_arrays(write(tmp_path, **{**valid(), **change}))
