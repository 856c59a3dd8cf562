import numpy as np
import pytest

from keras_caps.datasets import load
from keras_caps.datasets import sources
from tests.datasets import fixtures

NUM_TRAIN = 60  # holdout 6, train 54
NUM_TEST = 20


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mnist")
    fixtures.write_idx_dataset(folder, num_train=NUM_TRAIN,
                               num_test=NUM_TEST)
    return str(folder)


def _placement(canvas, digits):
    """The (row, col) where one of `digits` sits alone on `canvas`."""
    for row in range(13):
        for col in range(13):
            window = canvas[row:row + 28, col:col + 28]
            rest = canvas.copy()
            rest[row:row + 28, col:col + 28] = 0
            if rest.any():
                continue
            if any(np.array_equal(window, digit) for digit in digits):
                return row, col
    return None


def test_test_split_is_centred(data_dir):
    ds = load("mnist_canvas", "test", batch_size=8, data_dir=data_dir,
              reconstruction=False)
    images = np.concatenate([x for x, _ in ds.as_numpy_iterator()])
    digits, _ = sources.load_image_arrays("mnist", data_dir)["test"]
    assert images.shape == (NUM_TEST, 40, 40, 1)
    np.testing.assert_array_equal(images[:, 6:34, 6:34, 0], digits)
    assert images.sum() == digits.astype("float64").sum()


def test_training_places_digits_at_random(data_dir):
    ds = load("mnist_canvas", "train", batch_size=9, data_dir=data_dir,
              seed=3)
    digits, _ = sources.load_image_arrays("mnist", data_dir)["train"]
    placements = []
    for _epoch in range(2):
        for inputs, targets in ds.as_numpy_iterator():
            assert inputs["image"].shape == (9, 40, 40, 1)
            np.testing.assert_allclose(targets["reconstruction"],
                                       inputs["image"] / 255.0)
            for canvas in inputs["image"][..., 0]:
                placement = _placement(canvas, digits)
                assert placement is not None
                placements.append(placement)
    assert len(set(placements)) > 20  # 108 draws of 169 positions
    rows, cols = zip(*placements, strict=True)
    assert min(rows) < 3 and max(rows) > 9
