"""Tiny synthetic MNIST-format data for the dataset tests."""

import gzip
import os

import numpy as np

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049


def synthetic_digits(num_examples, seed=0):
    """Distinct 28x28 "digits": textured blobs inside rows/cols [6, 22).

    Labels cycle through the ten classes. Each digit is a random rectangle
    of random pixel values, so digits differ from each other, have empty
    margins on every side and survive a shift of 6 after a padding of 4.
    """
    rng = np.random.default_rng(seed)
    images = np.zeros((num_examples, 28, 28), np.uint8)
    for index in range(num_examples):
        height, width = rng.integers(6, 14, size=2)
        top, left = rng.integers(6, 22 - height + 1), rng.integers(
            6, 22 - width + 1)
        images[index, top:top + height, left:left + width] = rng.integers(
            1, 256, size=(height, width))
    labels = np.arange(num_examples) % 10
    return images, labels.astype(np.uint8)


def idx_bytes(array, magic):
    header = np.array([magic, *array.shape], dtype=">u4").tobytes()
    return header + np.ascontiguousarray(array, np.uint8).tobytes()


def write_file(path, data, compress=True):
    opener = gzip.open if compress else open
    with opener(path, "wb") as file:
        file.write(data)


def write_idx_dataset(folder, num_train=200, num_test=50, seed=0,
                      compress=True):
    """Writes the four IDX files; returns {split: (images, labels)}."""
    os.makedirs(folder, exist_ok=True)
    suffix = ".gz" if compress else ""
    arrays = {"train": synthetic_digits(num_train, seed),
              "test": synthetic_digits(num_test, seed + 1)}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = arrays[split]
        write_file(os.path.join(folder, f"{prefix}-images-idx3-ubyte{suffix}"),
                   idx_bytes(images, IMAGES_MAGIC), compress)
        write_file(os.path.join(folder, f"{prefix}-labels-idx1-ubyte{suffix}"),
                   idx_bytes(labels, LABELS_MAGIC), compress)
    return arrays


def take_all(dataset):
    """Concatenates every batch of a dataset into NumPy arrays."""
    batches = list(dataset.as_numpy_iterator())
    import keras

    return keras.tree.map_structure(lambda *parts: np.concatenate(parts),
                                    *batches)
