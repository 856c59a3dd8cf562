import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps.datasets import holdout
from keras_caps.datasets.user_data import image_shifts
from keras_caps.datasets.user_data import user_dataset
from keras_caps.testing import image_folders
from tests.datasets import fixtures

pytestmark = pytest.mark.single_backend

COUNTS = {"cat": 12, "dog": 8, "eel": 5}  # 25 images, uneven classes


@pytest.fixture
def folder(tmp_path):
    image_folders.write_image_folder(tmp_path / "images", COUNTS,
                                     formats=("png",), colors=("L",))
    return tmp_path / "images"


def test_is_user_dataset():
    assert user_dataset.is_user_dataset("npz:data.npz")
    assert user_dataset.is_user_dataset("tfds:svhn_cropped")
    assert not user_dataset.is_user_dataset("mnist")
    assert not user_dataset.is_user_dataset(None)


def test_folder_test_share_is_stratified_and_disjoint(folder):
    data = user_dataset.resolve_user_dataset(f"folder:{folder}", seed=3)
    train_images, train_labels = data.arrays.train
    test_images, test_labels = data.arrays.test
    # 20 % of each class: 12 -> 2.4, 8 -> 1.6, 5 -> 1; 5 in all.
    np.testing.assert_array_equal(np.bincount(test_labels), [2, 2, 1])
    np.testing.assert_array_equal(np.bincount(train_labels), [10, 6, 4])
    every = {image.tobytes() for image in np.concatenate(
        [train_images, test_images])}
    assert len(every) == 25
    assert data.info.input_shape == (16, 16, 1)
    assert data.info.num_classes == 3
    assert (data.info.num_train, data.info.num_validation,
            data.info.num_test) == (20, 2, 5)
    assert data.class_names == ("cat", "dog", "eel")
    again = user_dataset.resolve_user_dataset(f"folder:{folder}", seed=3)
    np.testing.assert_array_equal(again.arrays.test[0], test_images)


def test_batches_have_the_loaders_format(folder):
    data = user_dataset.resolve_user_dataset(f"folder:{folder}")
    images, labels = data.arrays.train
    _, held = holdout.holdout_indices(labels, seed=42)
    ds = data.load("validation", batch_size=4)
    assert int(ds.cardinality()) == 1
    inputs, targets = fixtures.take_all(ds)
    np.testing.assert_array_equal(inputs["image"],
                                  images[held].astype("float32"))
    np.testing.assert_array_equal(inputs["label"],
                                  np.eye(3, dtype="float32")[labels[held]])
    np.testing.assert_array_equal(targets["length"], inputs["label"])
    np.testing.assert_allclose(targets["reconstruction"],
                               inputs["image"] / 255.0)
    train = data.load("train", batch_size=4, augment=True)
    assert int(train.cardinality()) == 18 // 4
    assert train.element_spec[0]["image"].shape == (4, 16, 16, 1)
    plain = data.load("test", batch_size=8, reconstruction=False)
    test_images, _ = fixtures.take_all(plain)
    assert test_images.dtype == np.float32 and len(test_images) == 5


def test_random_shift_moves_a_pixel_within_ten_percent():
    images = np.zeros((64, 20, 30, 1), "float32")
    images[:, 10, 15, 0] = 255.0
    shifted = image_shifts.random_image_shift(
        tf.constant(images), tf.constant([4, 2], tf.int64)).numpy()
    _, rows, columns, _ = np.nonzero(shifted)
    assert len(rows) == 64  # one pixel per image, none lost
    np.testing.assert_array_equal(shifted.sum(axis=(1, 2, 3)), 255.0)
    assert set(rows - 10) == {-2, -1, 0, 1, 2}  # 10 % of 20
    assert set(columns - 15) == {-3, -2, -1, 0, 1, 2, 3}  # 10 % of 30


def test_test_dir_and_source_record(folder, tmp_path):
    # Other images than the training folder's (the same seeds would draw
    # copies of its first images, which `test_dir` refuses).
    image_folders.write_image_folder(tmp_path / "test", {
        "cat": 2, "dog": 1, "eel": 1}, formats=("png",), colors=("L",),
        seed=100)
    data = user_dataset.resolve_user_dataset(
        f"folder:{folder}", test_dir=str(tmp_path / "test"))
    assert data.info.num_train == 25 and data.info.num_test == 4
    record = json.loads(json.dumps(data.source_record()))
    assert record["spec"] == f"folder:{folder}"
    assert record["path"] == str(folder)
    assert record["test"]["source"] == "test_dir"
    assert record["test"]["fingerprint"]["files"] == 4
    assert record["image_size"] == [16, 16]
    assert record["color_mode"] == "grayscale"
    assert record["class_names"] == ["cat", "dog", "eel"]
    assert record["fingerprint"]["files"] == 25


def test_npz_and_tfds_specs(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "data.npz"
    np.savez(path, x_train=rng.integers(0, 256, (10, 8, 8, 3), "uint8"),
             y_train=np.arange(10) % 2, x_test=np.zeros((2, 8, 8, 3)),
             y_test=np.array([0, 1]))
    data = user_dataset.resolve_user_dataset(f"npz:{path}")
    assert data.info.input_shape == (8, 8, 3)
    assert data.source_record()["test"] == {"source": "x_test"}
    with tfds.testing.mock_data(num_examples=5):
        data = user_dataset.resolve_user_dataset("tfds:svhn_cropped",
                                                 image_size=20)
    assert data.info.input_shape == (20, 20, 3)
    assert data.info.num_classes == 10


@pytest.mark.parametrize("spec, options, message", [
    ("mnist", {}, "`dataset`, expected a name starting with"),
    ("folder:", {}, "nothing after 'folder:'"),
    ("folder:~/no_such_folder_here", {}, "`dataset`: '/.*no_such_folder"),
    ("npz:x.npz", {"test_share": 0.1}, "folder: datasets only"),
    ("folder:x", {"test_share": 1.0}, "strictly between 0 and 1"),
    ("folder:x", {"test_share": 0.1, "test_dir": "t"}, "not both"),
    ("folder:x", {"image_size": (0, 3)}, "image_size"),
    ("folder:x", {"color_mode": "rgba"}, "`color_mode`"),
])
def test_bad_arguments(folder, spec, options, message):
    spec = spec.replace("folder:x", f"folder:{folder}")
    with pytest.raises((ValueError, TypeError), match=message):
        user_dataset.resolve_user_dataset(spec, **options)


def test_too_few_images(tmp_path):
    image_folders.write_image_folder(tmp_path, {"a": 1, "b": 2},
                                     formats=("png",))
    with pytest.raises(ValueError, match=r"classes \['a'\] keep no "
                       "training image"):
        user_dataset.resolve_user_dataset(f"folder:{tmp_path}",
                                          test_share=0.5)
    data = user_dataset.resolve_user_dataset(f"folder:{tmp_path}",
                                             test_share=0.3)
    with pytest.raises(ValueError, match="'validation' split .* is empty"):
        data.load("validation", batch_size=2)
    with pytest.raises(ValueError, match="`batch_size`.* holds 2 images"):
        data.load("train", batch_size=3, validation="test")


def test_a_folders_test_share_is_the_same_for_every_run_seed(tmp_path):
    # Runs with other seeds (every model of a comparison) are scored on
    # the same test images; docs/own-data.md says so.
    from keras_caps.training import TrainingSettings
    from keras_caps.training.user_data import read_user_data

    image_folders.write_image_folder(tmp_path, {"a": 10, "b": 10},
                                     formats=("png",), colors=("L",))
    tests = []
    for seed in (1, 2):
        settings = TrainingSettings("cnn", f"folder:{tmp_path}", seed=seed)
        data, settings = read_user_data(settings, {})
        tests.append(data.arrays.test)
        assert settings.data_source["test"]["seed"] == 42
    np.testing.assert_array_equal(tests[0][0], tests[1][0])
    np.testing.assert_array_equal(tests[0][1], tests[1][1])
