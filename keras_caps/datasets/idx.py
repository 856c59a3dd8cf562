"""Reader for the raw IDX files of MNIST and Fashion-MNIST."""

import gzip
import logging
import os

import numpy as np

_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049
_IMAGE_SIZE = 28
_NUM_CLASSES = 10

# split -> (images file, labels file), as distributed by LeCun et al. and by
# Zalando Research for Fashion-MNIST.
IDX_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx_dataset(data_dir):
    """Reads the four MNIST-format IDX files of a folder into NumPy arrays.

    The folder must hold `train-images-idx3-ubyte.gz`,
    `train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz` and
    `t10k-labels-idx1-ubyte.gz` (uncompressed copies without the `.gz`
    suffix are accepted too). Every file is checked: magic number (2051
    for images, 2049 for labels), image size 28x28, payload length, label
    range 0-9, and equal image and label counts.

    Args:
        data_dir: str or path-like. The folder holding the files.

    Returns:
        dict with keys `"train"` and `"test"`, each a tuple
        `(images, labels)`: images uint8 of shape `(num_examples, 28, 28)`,
        labels int64 of shape `(num_examples,)`.

    Raises:
        ValueError: if a file is missing, truncated or malformed. The message
            names the file and, for a missing file, lists the files expected.

    Example:

    >>> arrays = read_idx_dataset("/data/mnist")  # doctest: +SKIP
    >>> arrays["train"][0].shape  # doctest: +SKIP
    (60000, 28, 28)
    """
    data_dir = os.fspath(data_dir)
    arrays = {}
    for split, (images_name, labels_name) in IDX_FILES.items():
        images = _read_idx_file(_find_file(data_dir, images_name),
                                _IMAGES_MAGIC)
        labels = _read_idx_file(_find_file(data_dir, labels_name),
                                _LABELS_MAGIC)
        if len(images) != len(labels):
            raise ValueError(
                f"The IDX files of the {split!r} split disagree: "
                f"{images_name} holds {len(images)} images but "
                f"{labels_name} holds {len(labels)} labels. Received: "
                f"data_dir={data_dir!r}")
        if labels.size and labels.max() >= _NUM_CLASSES:
            raise ValueError(
                f"{os.path.join(data_dir, labels_name)} holds labels outside "
                f"[0, {_NUM_CLASSES - 1}]; it is not an MNIST-format label "
                f"file. Received: largest label {int(labels.max())}")
        arrays[split] = (images, labels.astype("int64"))
        logging.info("Read %d %s examples from %s.", len(images), split,
                     data_dir)
    return arrays


def _find_file(data_dir, name):
    for candidate in (name, name[:-len(".gz")]):
        path = os.path.join(data_dir, candidate)
        if os.path.isfile(path):
            return path
    expected = [name for pair in IDX_FILES.values() for name in pair]
    raise ValueError(
        f"Missing IDX file {name!r} in {data_dir!r}. The folder must hold "
        f"the four MNIST-format files {expected}. Point `data_dir` (or "
        "--data-dir, or the KERAS_CAPS_DATA_DIR environment variable) at the "
        f"folder that holds them. Received: data_dir={data_dir!r}")


def _read_idx_file(path, magic):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as file:
            data = file.read()
    except (OSError, EOFError) as error:
        raise ValueError(
            f"Could not read the IDX file {path!r}: {error}. Re-download it; "
            "it may be truncated or not gzip-compressed.") from error
    num_dims = 3 if magic == _IMAGES_MAGIC else 1
    header_size = 4 * (1 + num_dims)
    if len(data) < header_size:
        raise ValueError(
            f"The IDX file {path!r} is truncated: its header needs "
            f"{header_size} bytes. Received: {len(data)} bytes")
    header = np.frombuffer(data, dtype=">u4", count=1 + num_dims)
    if int(header[0]) != magic:
        kind = "image" if magic == _IMAGES_MAGIC else "label"
        raise ValueError(
            f"The IDX file {path!r} has the wrong magic number for an MNIST "
            f"{kind} file: expected {magic}. Received: magic number "
            f"{int(header[0])}")
    shape = tuple(int(dim) for dim in header[1:])
    if num_dims == 3 and shape[1:] != (_IMAGE_SIZE, _IMAGE_SIZE):
        raise ValueError(
            f"The IDX file {path!r} holds images of size {shape[1:]}, "
            f"expected ({_IMAGE_SIZE}, {_IMAGE_SIZE}). Received: dims {shape}")
    expected = int(np.prod(shape))
    payload = len(data) - header_size
    if payload != expected:
        state = "truncated" if payload < expected else "too long"
        raise ValueError(
            f"The IDX file {path!r} is {state}: dims {shape} need "
            f"{expected} payload bytes. Received: {payload} bytes")
    return np.frombuffer(data, dtype=np.uint8, offset=header_size).reshape(
        shape)
