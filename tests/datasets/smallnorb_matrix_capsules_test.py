"""smallNORB prepared as for matrix capsules (Hinton et al. 2018, §5)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps.datasets import smallnorb
from tests.datasets import fixtures

NUM_EXAMPLES = 30  # per split under mock_data: holdout 3, train 27
PRESET = {"preset": "matrix_capsules"}


@pytest.fixture(autouse=True)
def mock_smallnorb():
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        yield


def _first_views(split):
    examples = tfds.load("smallnorb", split=split, download=False,
                         shuffle_files=False)
    views, labels = [], []
    for example in examples.as_numpy_iterator():
        views.append(example["image"])
        labels.append(example["label_category"])
    return np.stack(views).astype("float32"), np.array(labels)


def test_evaluation_is_the_centre_32_crop_of_the_48_view():
    views, labels = _first_views("test")
    ds = smallnorb.load("test", batch_size=8, reconstruction=False, **PRESET)
    assert ds.element_spec[0].shape.as_list() == [None, 32, 32, 1]
    images, one_hot = fixtures.take_all(ds)
    expected = tf.image.resize(views, (48, 48),
                               method="bilinear").numpy()[:, 8:40, 8:40]
    np.testing.assert_allclose(images, expected, atol=1e-4)
    np.testing.assert_array_equal(one_hot.argmax(-1), labels)


def test_training_crops_and_jitter():
    ds = smallnorb.load("train", batch_size=4, reconstruction=False, seed=3,
                        **PRESET)
    assert int(ds.cardinality()) == 27 // 4
    assert ds.element_spec[0].shape.as_list() == [4, 32, 32, 1]
    first = fixtures.take_all(ds)[0]
    again = fixtures.take_all(smallnorb.load(
        "train", batch_size=4, reconstruction=False, seed=3, **PRESET))[0]
    np.testing.assert_array_equal(first, again)  # a function of the seed
    assert first.min() >= 0.0 and first.max() <= 255.0
    # Not the centre crops: the jitter moved every image's mean or spread.
    plain = fixtures.take_all(smallnorb.load(
        "train", batch_size=4, reconstruction=False, seed=3, augment=False,
        **PRESET))[0]
    assert plain.shape == first.shape
    assert not np.allclose(np.sort(first.mean(axis=(1, 2, 3))),
                           np.sort(plain.mean(axis=(1, 2, 3))))


def test_unknown_preset():
    with pytest.raises(ValueError, match="preset"):
        smallnorb.load("test", batch_size=4, preset="sabour")
