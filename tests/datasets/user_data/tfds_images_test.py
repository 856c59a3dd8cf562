import types

import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_caps.datasets.user_data import tfds_images

pytestmark = pytest.mark.single_backend

NUM_EXAMPLES = 6  # per split under mock_data


@pytest.fixture(autouse=True)
def mock_tfds():
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        yield


def raw_split(split):
    examples = tfds.load("svhn_cropped", split=split, download=False,
                         shuffle_files=False, as_supervised=True)
    images, labels = zip(*examples.as_numpy_iterator())
    return np.stack(images), np.array(labels)


def test_discovers_the_image_and_label_features():
    data = tfds_images.read_tfds_images("svhn_cropped")
    for split, (images, labels) in (("train", data.train),
                                    ("test", data.test)):
        expected_images, expected_labels = raw_split(split)
        np.testing.assert_array_equal(images, expected_images)
        np.testing.assert_array_equal(labels, expected_labels)
    assert data.train[0].shape == (NUM_EXAMPLES, 32, 32, 3)
    assert data.class_names == tuple(str(digit) for digit in range(10))
    assert data.source["image_key"] == "image"
    assert data.source["label_key"] == "label"
    assert data.source["name"] == "svhn_cropped"


def test_resizes_and_converts_when_asked():
    data = tfds_images.read_tfds_images("svhn_cropped", image_size=(16, 16),
                                        color_mode="grayscale")
    assert data.test[0].shape == (NUM_EXAMPLES, 16, 16, 1)
    assert data.test[0].dtype == np.uint8


def test_unknown_name():
    with pytest.raises(ValueError, match="`dataset`: TFDS has no dataset "
                       "named 'no_such_dataset_xyz'"):
        tfds_images.read_tfds_images("no_such_dataset_xyz")


def test_not_image_classification():
    with pytest.raises(ValueError, match="not an image classification "
                       "dataset.*'text': 'Text'"):
        tfds_images.read_tfds_images("imdb_reviews")


def test_a_pinned_version_is_read():
    data = tfds_images.read_tfds_images("svhn_cropped:3.1.0")
    assert data.source["version"] == "3.1.0"
    np.testing.assert_array_equal(data.test[1], raw_split("test")[1])


def test_needs_a_train_and_a_test_split(monkeypatch):
    real_builder = tfds.builder

    class TrainOnly:
        def __init__(self, name, **kwargs):
            real = real_builder(name, **kwargs)
            self.version = real.version
            self.info = types.SimpleNamespace(
                features=real.info.features,
                splits={"train": None, "extra": None})

    monkeypatch.setattr(tfds, "builder", TrainOnly)
    with pytest.raises(ValueError, match=r"needs a 'train' and a 'test' "
                       r"split. Received the splits \['extra', 'train'\]"):
        tfds_images.read_tfds_images("svhn_cropped")
