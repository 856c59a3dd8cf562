"""smallNORB's novel-viewpoint splits (Hinton, Sabour & Frosst 2018, §5.1).

Checked against the paper's subsets written out by hand (azimuths 300,
320, 340, 0, 20, 40 degrees; elevations 30, 35, 40 degrees), against the
TFDS encoding (`label_azimuth` k = 20 k degrees, `label_elevation` k =
30 + 5 k degrees), and on mocked TFDS data whose viewpoint labels the test
sets itself, so every split's examples are known in advance.
"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_caps import datasets
from keras_caps.datasets import holdout
from keras_caps.datasets import smallnorb
from keras_caps.datasets import viewpoints
from keras_caps.training import TrainingSettings
from tests.datasets import fixtures

# The mock: one image per (azimuth, elevation) pair, 18 x 9 = 162 per
# split, category `index % 5`; every pixel of both views of example
# `index` is `index`, so a loaded image says which example it is. The
# views are 8 x 8 instead of 96 x 96 to keep the test short: the loader
# resizes them, and a constant image stays constant.
NUM_AZIMUTHS, NUM_ELEVATIONS = 18, 9
INDICES = np.arange(NUM_AZIMUTHS * NUM_ELEVATIONS)
AZIMUTHS = INDICES % NUM_AZIMUTHS
ELEVATIONS = INDICES // NUM_AZIMUTHS
CATEGORIES = INDICES % 5
# The paper's familiar viewpoints in degrees, and the TFDS labels worked
# out by hand from them: azimuth 300 = 20 * 15, ...; elevation 30 = 30 +
# 5 * 0, ...
PAPER_DEGREES = {"azimuth": (300, 320, 340, 0, 20, 40),
                 "elevation": (30, 35, 40)}
HAND_LABELS = {"azimuth": {15, 16, 17, 0, 1, 2}, "elevation": {0, 1, 2}}
MOCK_LABELS = {"azimuth": AZIMUTHS, "elevation": ELEVATIONS}


def _grid_dataset(builder, *args, **kwargs):
    del args, kwargs

    def examples():
        for index in INDICES:
            image = np.full((8, 8, 1), index, np.uint8)
            yield {"image": image, "image2": image,
                   "label_category": CATEGORIES[index],
                   "instance": index % 10,
                   "label_elevation": ELEVATIONS[index],
                   "label_azimuth": AZIMUTHS[index],
                   "label_lighting": index % 6}

    features = builder.info.features
    signature = {key: tf.TensorSpec(features[key].shape,
                                    features[key].tf_dtype)
                 for key in features}
    for key in ("image", "image2"):
        signature[key] = tf.TensorSpec((8, 8, 1), tf.uint8)
    dataset = tf.data.Dataset.from_generator(examples,
                                             output_signature=signature)
    return dataset.apply(tf.data.experimental.assert_cardinality(
        len(INDICES)))


@contextlib.contextmanager
def grid_mock():
    with tfds.testing.mock_data(as_dataset_fn=_grid_dataset):
        yield


def loaded_indices(split, which, **kwargs):
    """The mock indices of the examples a split yields, in order."""
    ds = smallnorb.load(split, batch_size=64, training=False,
                        reconstruction=False, viewpoints=which,
                        preset="matrix_capsules", **kwargs)
    images, labels = fixtures.take_all(ds)
    indices = np.rint(images[:, 0, 0, 0]).astype("int64")
    np.testing.assert_array_equal(labels.argmax(-1), CATEGORIES[indices])
    return indices


@pytest.mark.single_backend
@pytest.mark.parametrize("which", ["azimuth", "elevation"])
def test_the_papers_viewpoints(which):
    labels = np.arange(viewpoints.NUM_LABELS[which])
    familiar = viewpoints.familiar_mask(which, labels)
    assert set(labels[familiar]) == HAND_LABELS[which]
    assert set(viewpoints.degrees(which, labels[familiar]).tolist()) == set(
        PAPER_DEGREES[which])
    # The novel ones: azimuths 60 to 280, elevations 45 to 70.
    novel = viewpoints.degrees(which, labels[~familiar])
    expected = (range(60, 281, 20) if which == "azimuth"
                else range(45, 71, 5))
    assert novel.tolist() == list(expected)


@pytest.mark.single_backend
@pytest.mark.parametrize("which", ["azimuth", "elevation"])
def test_counts_on_the_whole_dataset(which):
    # Every split of smallNORB: 5 categories x 5 instances x 9 elevations
    # x 18 azimuths x 6 lightings = 24,300 images. The paper trains on
    # "one-third of the training data" and tests on "the two-thirds of
    # the test data" with the novel viewpoints.
    grid = np.stack(np.meshgrid(np.arange(5), np.arange(5), np.arange(9),
                                np.arange(18), np.arange(6),
                                indexing="ij"), -1).reshape(-1, 5)
    assert len(grid) == 24300
    column = {"elevation": 2, "azimuth": 3}[which]
    familiar = viewpoints.familiar_mask(which, grid[:, column])
    assert (familiar.sum(), (~familiar).sum()) == (8100, 16200)
    train, held = holdout.holdout_indices(grid[familiar, 0], seed=42)
    assert (len(train), len(held)) == (7290, 810)
    assert np.bincount(grid[familiar, 0][held]).tolist() == [162] * 5


def test_splits_hold_the_expected_examples():
    which = "azimuth"
    familiar = np.isin(MOCK_LABELS[which], sorted(HAND_LABELS[which]))
    positions = np.flatnonzero(familiar)
    train, held = holdout.holdout_indices(CATEGORIES[positions], seed=3)
    with grid_mock():
        got = {split: loaded_indices(split, which, seed=3) for split in (
            "train", "validation", "test", "test_familiar", "test_novel")}
        official = {split: loaded_indices(split, which, validation="test")
                    for split in ("train", "validation")}
        mask = smallnorb.familiar_test_images(which)
    assert len(positions) == 54  # 6 azimuths x 9, or 3 elevations x 18
    np.testing.assert_array_equal(got["train"], positions[train])
    np.testing.assert_array_equal(got["validation"], positions[held])
    assert len(got["validation"]) == 5  # round(0.1 * 54)
    np.testing.assert_array_equal(got["test"], INDICES)
    np.testing.assert_array_equal(got["test_familiar"], positions)
    np.testing.assert_array_equal(got["test_novel"],
                                  np.flatnonzero(~familiar))
    assert len(got["test_novel"]) == 108
    np.testing.assert_array_equal(official["train"], positions)
    np.testing.assert_array_equal(official["validation"], positions)
    np.testing.assert_array_equal(mask, familiar)


def test_elevation_splits():
    familiar = ELEVATIONS < 3  # 30, 35 and 40 degrees
    positions = np.flatnonzero(familiar)
    train, _ = holdout.holdout_indices(CATEGORIES[positions], seed=42)
    with grid_mock():
        got = {split: loaded_indices(split, "elevation")
               for split in ("train", "test_novel")}
    np.testing.assert_array_equal(got["train"], positions[train])
    np.testing.assert_array_equal(got["test_novel"],
                                  np.flatnonzero(~familiar))


def test_counts_on_random_mock_data():
    with tfds.testing.mock_data(num_examples=40):
        raw = list(tfds.load("smallnorb", split="train", download=False,
                             shuffle_files=False).as_numpy_iterator())
        sizes = {split: len(fixtures.take_all(smallnorb.load(
            split, batch_size=64, training=False, reconstruction=False,
            viewpoints="azimuth"))[1]) for split in ("train", "test_novel")}
    azimuths = np.array([example["label_azimuth"] for example in raw])
    num_familiar = int(np.sum(
        (azimuths <= 2) | (azimuths >= 15)))  # 0-40 and 300-340 degrees
    held = int(np.floor(0.1 * num_familiar + 0.5))
    # The mock draws the same examples for both splits.
    assert sizes == {"train": num_familiar - held,
                     "test_novel": 40 - num_familiar}


def test_training_statistics_of_the_familiar_images():
    familiar = np.flatnonzero(np.isin(AZIMUTHS, [15, 16, 17, 0, 1, 2]))
    train, _ = holdout.holdout_indices(CATEGORIES[familiar], seed=42)
    pixels = familiar[train].astype("float64")  # One value per image.
    with grid_mock():
        mean, variance = datasets.training_statistics(
            "smallnorb", viewpoints="azimuth")
        all_mean, _ = datasets.training_statistics("smallnorb")
    np.testing.assert_allclose(mean, [pixels.mean()] * 2, rtol=1e-6)
    np.testing.assert_allclose(variance, [pixels.var()] * 2, rtol=1e-5)
    assert not np.allclose(all_mean, mean)


@pytest.mark.single_backend
def test_refusals():
    with pytest.raises(ValueError, match=r"`viewpoints`.*'mnist'"):
        datasets.load("mnist", "train", batch_size=4, viewpoints="azimuth")
    with pytest.raises(ValueError, match=r"`viewpoints`.*'zenith'"):
        smallnorb.load("train", batch_size=4, viewpoints="zenith")
    with pytest.raises(ValueError, match=r"`split`.*test_novel.*viewpoints"):
        smallnorb.load("test_novel", batch_size=4)
    with pytest.raises(ValueError, match=r"`viewpoints`.*'fashion_mnist'"):
        TrainingSettings(model="cnn", dataset="fashion_mnist",
                         dataset_options={"viewpoints": "elevation"})
    with pytest.raises(ValueError, match=r"`viewpoints`.*'npz:x.npz'"):
        TrainingSettings(model="cnn", dataset="npz:x.npz",
                         dataset_options={"viewpoints": "elevation"})
    with pytest.raises(ValueError, match=r"\[0, 17\]"):
        viewpoints.familiar_mask("azimuth", [0, 34])  # Raw, not TFDS
