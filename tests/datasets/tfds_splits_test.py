import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_caps.datasets import holdout
from keras_caps.datasets import tfds_splits

NUM_EXAMPLES = 20


@pytest.fixture(autouse=True)
def mock_tfds():
    with tfds.testing.mock_data(num_examples=NUM_EXAMPLES):
        yield


def labels_of(examples):
    return np.array([label for _, label in examples.as_numpy_iterator()])


@pytest.mark.parametrize("split", ["train", "validation"])
def test_holdout_filters_by_position(split):
    everything, _ = tfds_splits.load_split(
        "cifar10", "train", validation="test", seed=3, data_dir=None,
        as_supervised=True)
    labels = labels_of(everything)
    train, held = holdout.holdout_indices(labels, seed=3)
    examples, num_examples = tfds_splits.load_split(
        "cifar10", split, validation="holdout", seed=3, data_dir=None,
        as_supervised=True)
    chosen = train if split == "train" else held
    assert num_examples == len(chosen) == int(examples.cardinality())
    np.testing.assert_array_equal(labels_of(examples), labels[chosen])


@pytest.mark.parametrize("split, validation", [
    ("test", "holdout"), ("validation", "test"), ("test", "test")])
def test_test_split_is_whole(split, validation):
    examples, num_examples = tfds_splits.load_split(
        "smallnorb", split, validation=validation, seed=0, data_dir=None,
        label_key="label_category", image_keys=("image", "image2"))
    assert num_examples == NUM_EXAMPLES
    assert "image2" in examples.element_spec
