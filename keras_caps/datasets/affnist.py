"""The affNIST test set (Tieleman, 2013), read from its published files.

affNIST transforms each MNIST digit by a random affine map onto a 40 x 40
canvas; Sabour et al. (2017, Section 5.2) train on MNIST digits placed at
random on a 40 x 40 canvas (`keras_caps.datasets.mnist_canvas`) and test
on affNIST's transformed test set: the 10,000 MNIST test digits, 32
transformations of each, 320,000 images. Tieleman publishes it in MATLAB
(version 5) `.mat` files, as 32 batches, `test_batches/1.mat` to
`test_batches/32.mat` (10,000 images each), or as one `test.mat`; each
holds a struct `affNISTdata` whose fields include

- `image`: uint8 `(1600, n)`, one column per image; the column's 1600
  pixels are the 40 x 40 image row after row (top row first, each row
  left to right), as Sabour et al.'s released affNIST reader takes them
  (`image.T.reshape(n, 40, 40)` in NumPy's row-major order);
- `label_int`: the class of each image, `(1, n)`, 0-9;
- `label_one_of_n` (one-hot, `(10, n)`) and the transformation of each
  image, which this reader does not need.

`load_test_set(folder)` finds the files under `folder`, checks that every
one is there and complete, and returns the images as the models take
them: `(320000, 40, 40, 1)` raw pixels. `test_files(folder)` only finds and
checks the files (their structure, not their pixels), quickly, before a
long training. Reading needs SciPy (`pip install keras_caps[affnist]`).

References:
- [Tieleman, 2013, affNIST](https://www.cs.toronto.edu/~tijmen/affNIST/)
- [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
"""

import os
import struct

import numpy as np

CANVAS_SIZE = 40
NUM_CLASSES = 10
NUM_BATCHES = 32
TEST_IMAGES = 320_000
"""The transformed test set's size: 32 transformations of each of the
10,000 MNIST test digits."""
BATCHES_FOLDER = "test_batches"
SINGLE_FILE = "test.mat"
STRUCT_NAME = "affNISTdata"
SOURCE = "affNIST (Tieleman)"
"""How records and tables name the affine set read from these files."""
_MAT_HEADER_BYTES = 128
# The MAT v5 type of a compressed data element, the only one not padded
# to 8 bytes.
_MI_COMPRESSED = 15


def test_files(folder):
    """The affNIST test files under `folder`, each checked to be complete.

    `folder` may hold the 32 batch files in a `test_batches` subfolder,
    be that subfolder itself (`1.mat` to `32.mat`), or hold the single
    `test.mat`; the batches are preferred when both are there.

    Args:
        folder: str. The affNIST folder (e.g. where `test_batches.zip`
            was extracted).

    Returns:
        list of str: the files, in the order of the test set.

    Raises:
        ValueError: `folder` is not a folder, holds none of the layouts
            above, lacks a batch file (named), or holds a file that is not
            a complete MATLAB 5 file (named: e.g. cut short by an
            interrupted download).

    Example:

    >>> test_files("affNIST/transformed")  # doctest: +SKIP
    ['affNIST/transformed/test_batches/1.mat', ...]
    """
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(
            folder):
        raise ValueError(
            "Received an invalid value for `affnist_dir`, expected the "
            "folder of the affNIST test files (test_batches/1.mat .. "
            f"32.mat, or test.mat). Received: affnist_dir={folder!r}")
    folder = os.fspath(folder)
    batches = os.path.join(folder, BATCHES_FOLDER)
    if not os.path.isdir(batches) and os.path.exists(
            os.path.join(folder, "1.mat")):
        batches = folder  # The `test_batches` folder itself.
    if os.path.isdir(batches):
        files = [os.path.join(batches, f"{index}.mat")
                 for index in range(1, NUM_BATCHES + 1)]
        missing = [path for path in files if not os.path.isfile(path)]
        if missing:
            raise ValueError(
                f"The affNIST test batch {missing[0]!r} is missing "
                f"({len(missing)} of the {NUM_BATCHES} files 1.mat .. "
                f"{NUM_BATCHES}.mat are): download and extract "
                "test_batches.zip of affNIST's transformed set again. "
                f"Received: affnist_dir={folder!r}")
    elif os.path.isfile(os.path.join(folder, SINGLE_FILE)):
        files = [os.path.join(folder, SINGLE_FILE)]
    else:
        archives = [name for name in (f"{BATCHES_FOLDER}.zip",
                                      f"{SINGLE_FILE}.zip")
                    if os.path.isfile(os.path.join(folder, name))]
        advice = (f"extract {archives[0]} there first" if archives else
                  "point `affnist_dir` at the folder of affNIST's "
                  "transformed test set")
        raise ValueError(
            f"{folder!r} holds neither {BATCHES_FOLDER}/1.mat .. "
            f"{NUM_BATCHES}.mat nor {SINGLE_FILE}: {advice}. Received: "
            f"affnist_dir={folder!r}")
    _check_room([element for path in files
                 for element in check_complete_mat_file(path)],
                files[0] if len(files) == 1 else folder)
    return files


def _check_room(elements, where):
    """Refuses uncompressed files with too little data for the whole set.

    Uncompressed, the pixels alone take 1600 bytes an image: files with
    less data cannot hold the transformed test set (e.g. the
    `just_centered` test.mat, 10,000 images), refused before a model
    trains. Compressed files are counted when read (`load_test_set`).
    """
    if any(kind == _MI_COMPRESSED for kind, _ in elements):
        return
    needed = TEST_IMAGES * CANVAS_SIZE * CANVAS_SIZE
    held = sum(count for _, count in elements)
    if held < needed:
        raise ValueError(
            f"The affNIST data of {where!r} is {held} bytes, less than the "
            f"{needed} that the {TEST_IMAGES} images of the transformed "
            "test set take: it is another set (e.g. `just_centered`, "
            "10,000 images). Point `affnist_dir` at the transformed test "
            "set.")


def load_test_set(folder):
    """The affNIST transformed test set under `folder`.

    Args:
        folder: str. See `test_files`.

    Returns:
        `(images, labels)`: uint8 `(320000, 40, 40, 1)` raw pixels (the
        digit upright, rows top to bottom) and int64 classes `(320000,)`,
        in the files' order.

    Raises:
        ValueError: missing, incomplete or malformed files (the message
            names the file), or a set of another size than 320,000 (e.g.
            the `just_centered` test set).
        ImportError: SciPy is not installed.

    Example:

    >>> images, labels = load_test_set("affNIST/transformed")  # doctest: +SKIP
    >>> images.shape  # doctest: +SKIP
    (320000, 40, 40, 1)
    """
    files = test_files(folder)
    parts = [read_mat_file(path) for path in files]
    images = np.concatenate([part[0] for part in parts])
    labels = np.concatenate([part[1] for part in parts])
    if len(labels) != TEST_IMAGES:
        raise ValueError(
            f"The affNIST files under {os.fspath(folder)!r} hold "
            f"{len(labels)} images, expected the {TEST_IMAGES} of the "
            "transformed test set (32 transformations of the 10,000 MNIST "
            "test digits); the `just_centered` set, or one of the training "
            f"batches, is another set. Received: affnist_dir={folder!r}")
    return images, labels


def read_mat_file(path):
    """The images and labels of one affNIST `.mat` file.

    Returns:
        `(images, labels)`: uint8 `(n, 40, 40, 1)`, int64 `(n,)`.
    """
    try:
        from scipy import io as scipy_io
    except ImportError:  # pragma: no cover - SciPy ships with the extras.
        raise ImportError(
            "Reading the affNIST .mat files needs SciPy: pip install "
            "scipy (or keras_caps[affnist]).") from None
    try:
        contents = scipy_io.loadmat(path, variable_names=[STRUCT_NAME])
    except Exception as error:  # SciPy raises many types on a bad file.
        raise ValueError(
            f"The affNIST file {path!r} could not be read as a MATLAB "
            f"file ({type(error).__name__}: {error}); download it "
            "again.") from None
    record = contents.get(STRUCT_NAME)
    names = getattr(getattr(record, "dtype", None), "names", None) or ()
    if record is None or record.size != 1 or not {
            "image", "label_int"} <= set(names):
        raise ValueError(
            f"The affNIST file {path!r} holds no struct {STRUCT_NAME!r} "
            "with fields 'image' and 'label_int'; it is not an affNIST "
            f"file. Received: variables {sorted(contents)}")
    record = record.reshape(-1)[0]
    return _images(path, record["image"]), _labels(
        path, record["label_int"], record["image"].shape[-1])


def _images(path, columns):
    columns = np.asarray(columns)
    pixels = CANVAS_SIZE * CANVAS_SIZE
    if columns.ndim != 2 or columns.shape[0] != pixels:
        raise ValueError(
            f"The affNIST file {path!r} holds images of shape "
            f"{columns.shape}, expected ({pixels}, n): one column of "
            f"{CANVAS_SIZE}x{CANVAS_SIZE} pixels per image.")
    if columns.size and (columns.min() < 0 or columns.max() > 255):
        raise ValueError(
            f"The affNIST file {path!r} holds pixel values outside "
            f"[0, 255] (from {columns.min()} to {columns.max()}).")
    # (1600, n) -> (n, 1600): each row a row-major 40 x 40 image.
    images = np.ascontiguousarray(columns.T).astype(np.uint8)
    return images.reshape(-1, CANVAS_SIZE, CANVAS_SIZE, 1)


def _labels(path, labels, num_images):
    labels = np.asarray(labels)
    if labels.size != num_images:
        raise ValueError(
            f"The affNIST file {path!r} holds {labels.size} labels for "
            f"{num_images} images.")
    labels = labels.reshape(-1)
    if labels.size and (np.any(labels != np.round(labels))
                        or labels.min() < 0
                        or labels.max() >= NUM_CLASSES):
        raise ValueError(
            f"The affNIST file {path!r} holds labels outside the classes "
            f"0-{NUM_CLASSES - 1}.")
    return labels.astype(np.int64)


def check_complete_mat_file(path):
    """Refuses a file that is not a complete MATLAB 5 `.mat` file.

    Reads the 128-byte header and the tag (type, byte count) of each
    top-level data element, not the data: a file cut short ends inside
    an element, which this catches without decompressing anything.

    Returns:
        list of `(type, byte count)`: the top-level data elements.

    Raises:
        ValueError: naming `path`.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as file:
        header = file.read(_MAT_HEADER_BYTES)
        if len(header) < _MAT_HEADER_BYTES or not header.startswith(
                b"MATLAB 5.0 MAT-file"):
            version = ("a MATLAB 7.3 (HDF5) file"
                       if header.startswith(b"MATLAB 7.3") else
                       "not a MATLAB 5 file")
            raise ValueError(
                f"The affNIST file {path!r} is {version} (or is cut short "
                "before its header ends); affNIST's files are MATLAB 5 "
                "files: download it again.")
        order = {b"IM": "<", b"MI": ">"}.get(header[126:128])
        if order is None:
            raise ValueError(
                f"The affNIST file {path!r} has no MATLAB 5 byte-order "
                "mark; download it again.")
        offset, elements = _MAT_HEADER_BYTES, []
        while offset < size:
            file.seek(offset)
            tag = file.read(8)
            if len(tag) < 8:
                break
            kind, count = struct.unpack(order + "II", tag)
            elements.append((kind, count))
            end = offset + 8 + count
            if end > size:
                raise ValueError(
                    f"The affNIST file {path!r} is truncated: it is {size} "
                    f"bytes, and its data element at byte {offset} ends at "
                    f"byte {end}. Download it again.")
            if kind != _MI_COMPRESSED:  # Matrices are 8-byte aligned.
                end += -count % 8
            offset = end
        if offset == _MAT_HEADER_BYTES or offset < size:
            raise ValueError(
                f"The affNIST file {path!r} is truncated or empty: it "
                "holds no complete MATLAB data element after its header. "
                "Download it again.")
    return elements
