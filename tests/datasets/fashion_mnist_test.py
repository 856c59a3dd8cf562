import numpy as np
import tensorflow_datasets as tfds

from keras_caps.datasets import fashion_mnist
from tests.datasets import fixtures


def test_reads_its_own_subfolder(tmp_path):
    fixtures.write_idx_dataset(tmp_path / "mnist", num_train=20,
                               num_test=10, seed=0)
    expected = fixtures.write_idx_dataset(tmp_path / "fashion_mnist",
                                          num_train=20, num_test=10, seed=5)
    ds = fashion_mnist.load("test", batch_size=8, data_dir=str(tmp_path),
                            reconstruction=False)
    images, labels = fixtures.take_all(ds)
    np.testing.assert_array_equal(images[..., 0], expected["test"][0])
    np.testing.assert_array_equal(labels.argmax(-1), expected["test"][1])


def test_training_batches_like_mnist(tmp_path):
    fixtures.write_idx_dataset(tmp_path, num_train=40, num_test=10)
    ds = fashion_mnist.load("train", batch_size=8, data_dir=str(tmp_path))
    assert int(ds.cardinality()) == 36 // 8
    inputs, targets = next(ds.as_numpy_iterator())
    assert inputs["image"].shape == (8, 28, 28, 1)
    assert inputs["label"].shape == (8, 10)
    np.testing.assert_allclose(targets["reconstruction"],
                               inputs["image"] / 255.0, rtol=1e-6)


def test_tfds_source():
    with tfds.testing.mock_data(num_examples=20):
        ds = fashion_mnist.load("validation", batch_size=8,
                                reconstruction=False)
        images, labels = fixtures.take_all(ds)
    assert images.shape == (2, 28, 28, 1) and labels.shape == (2, 10)
