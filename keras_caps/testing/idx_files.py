"""Writes small datasets in MNIST's IDX format, for tests and examples."""

import gzip
import os
import struct

import numpy as np

_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def write_idx_dataset(folder, train, test):
    """Writes the four gzipped IDX files of an MNIST-format dataset.

    Args:
        folder: str. Created if missing.
        train: `(images, labels)`, uint8 images `(n, height, width)` and
            integer labels `(n,)`.
        test: `(images, labels)` likewise.

    Returns:
        `folder`.

    Example:

    >>> images = np.zeros((4, 28, 28), "uint8")
    >>> folder = write_idx_dataset(tempfile.mkdtemp(),  # doctest: +SKIP
    ...     (images, np.arange(4)), (images, np.arange(4)))
    """
    os.makedirs(folder, exist_ok=True)
    for split, (images, labels) in (("train", train), ("test", test)):
        images = np.asarray(images, dtype="uint8")
        labels = np.asarray(labels, dtype="uint8")
        image_file, label_file = _FILES[split]
        header = struct.pack(">IIII", 2051, *images.shape)
        with gzip.open(os.path.join(folder, image_file), "wb") as file:
            file.write(header + images.tobytes())
        header = struct.pack(">II", 2049, len(labels))
        with gzip.open(os.path.join(folder, label_file), "wb") as file:
            file.write(header + labels.tobytes())
    return folder


def synthetic_digits(num_examples, seed=0, num_classes=10):
    """Easy synthetic 28x28 "digits": class k is a bright bar at row 2k+4.

    Returns:
        `(images, labels)`: uint8 `(num_examples, 28, 28)` and int labels.
    """
    rng = np.random.default_rng(seed)
    labels = np.arange(num_examples) % num_classes
    rng.shuffle(labels)
    images = rng.integers(0, 30, (num_examples, 28, 28)).astype("uint8")
    for index, label in enumerate(labels):
        row = 2 * label + 4
        images[index, row:row + 2, 4:24] = 255
    return images, labels
