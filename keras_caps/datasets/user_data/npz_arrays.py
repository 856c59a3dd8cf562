"""Reads a user's dataset from a NumPy `.npz` file (`npz:PATH`).

The file holds `x_train`, `y_train`, `x_test` and `y_test`, and optionally
`class_names`:

- `x_*`: images `(num, height, width)` (one channel is added) or `(num,
  height, width, channels)` with 1 or 3 channels. Integers in [0, 255], or
  floats in [0, 255]; floats that all lie in [0, 1] are taken for
  [0, 1]-scaled pixels and multiplied by 255 (logged). Floats are rounded
  to whole pixel values, as image files hold.
- `y_*`: integer class ids `(num,)` (or `(num, 1)`) in [0, K), where K is
  `len(class_names)`, else the largest id plus one.
- `class_names`: optional 1-D array of K strings; else "0" .. "K-1".

`image_size` and `color_mode` convert the images as image files are
converted (`image_arrays.convert_images`).
"""

import hashlib
import logging
import os
import zipfile

import numpy as np

from keras_caps.datasets.user_data import image_arrays
from keras_caps.datasets.user_data import image_memory
from keras_caps.inference.class_names import check_class_names

REQUIRED_KEYS = ("x_train", "y_train", "x_test", "y_test")
_HASH_CHUNK = 2 ** 20

# What a .npz file (a zip archive) and a .npy file start with.
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_HOW_TO_WRITE = ("Write it with numpy.savez(path, x_train=..., y_train=..., "
                 "x_test=..., y_test=...).")
# The largest class id: labels are cast to int64 only after this check.
_MAX_CLASS_ID = 2**31 - 1


def read_npz_arrays(path, *, image_size=None, color_mode=None):
    """Reads and checks the arrays of a `.npz` file.

    Args:
        path: str. The `.npz` file.
        image_size: `(height, width)` or None (keep the arrays' size).
        color_mode: "grayscale", "rgb" or None (keep the channels).

    Returns:
        An `ImageArrays` with both splits.

    Raises:
        ValueError: no such file, not a `.npz` file, a missing key,
            mismatched lengths, labels that are not class ids, images of
            the wrong rank, channels or value range; the message names the
            file and the key.

    Example:

    >>> arrays = read_npz_arrays("digits.npz")  # doctest: +SKIP
    >>> arrays.train[0].shape  # doctest: +SKIP
    (1000, 28, 28, 1)
    """
    path = os.path.abspath(os.fspath(path))
    arrays = _load_npz(path)
    missing = [key for key in REQUIRED_KEYS if key not in arrays]
    if missing:
        raise ValueError(
            f"The file {path!r} (dataset npz:) lacks the arrays {missing}. "
            f"Expected the keys {list(REQUIRED_KEYS)} (and optionally "
            f"'class_names'). Received the keys {sorted(arrays)}.")
    splits, scaled = {}, False
    for split in ("train", "test"):
        images, was_scaled = _checked_images(arrays[f"x_{split}"],
                                             f"x_{split}", path)
        labels = _checked_labels(arrays[f"y_{split}"], f"y_{split}", path)
        if len(images) != len(labels):
            raise ValueError(
                f"x_{split} and y_{split} of {path!r} differ in length: "
                f"{len(images)} images, {len(labels)} labels.")
        splits[split] = (images, labels)
        scaled = scaled or was_scaled
    _check_same_shape(splits, path)
    class_names = _class_names(arrays, splits, path)
    image_memory.check_fits_in_memory(
        sum(len(labels) for _, labels in splits.values()),
        _converted_shape(splits["train"][0].shape[1:], image_size,
                         color_mode), f"npz:{path}")
    for split, (images, labels) in splits.items():
        splits[split] = (image_arrays.convert_images(images, image_size,
                                                     color_mode), labels)
    source = {"kind": "npz", "path": path, "bytes": os.path.getsize(path),
              "sha256": _sha256(path), "scaled_from_unit_range": scaled}
    return image_arrays.ImageArrays(train=splits["train"],
                                    test=splits["test"],
                                    class_names=class_names, source=source)


def _load_npz(path):
    if not os.path.isfile(path):
        raise ValueError(
            "Received an invalid value for `dataset`: no file at "
            f"{path!r} (npz: expects a NumPy .npz file).")
    with open(path, "rb") as file:
        start = file.read(len(_NPY_MAGIC))
    if not start.startswith(_ZIP_MAGICS):
        kind = ("a .npy file of one array" if start == _NPY_MAGIC
                else "not a zip archive")
        raise ValueError(
            f"Cannot read {path!r} as a NumPy .npz file of arrays (dataset "
            f"npz:): it is {kind}. {_HOW_TO_WRITE}")
    try:
        with zipfile.ZipFile(path) as archive:
            stored = sum(member.file_size for member in archive.infolist())
        image_memory.check_arrays_fit_in_memory(stored, f"npz:{path}")
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ValueError(
            f"Cannot read {path!r} as a NumPy .npz file of arrays (dataset "
            f"npz:): {_without_unsafe_hint(error)}. {_HOW_TO_WRITE}"
        ) from None


def _without_unsafe_hint(error):
    """NumPy's message without its advice to load pickled data (which
    runs code from the file)."""
    message = str(error)
    if "allow_pickle" in message:
        return ("it holds pickled (object) arrays, which keras_caps does "
                "not load: they can run code")
    return message


def _checked_images(images, key, path):
    """uint8 `(num, height, width, channels)`, and whether it was scaled."""
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(
            f"{key} of {path!r} must hold images (num, height, width) or "
            "(num, height, width, channels) with 1 or 3 channels. "
            f"Received shape {images.shape}.")
    if images.dtype == np.uint8:
        return images, False
    if images.dtype.kind not in "uif":
        raise ValueError(
            f"{key} of {path!r} must hold numbers (pixel values). Received "
            f"dtype {images.dtype}.")
    values = images.astype("float64")
    if values.size and not np.all(np.isfinite(values)):
        raise ValueError(f"{key} of {path!r} holds NaN or infinite values.")
    low = values.min() if values.size else 0.0
    high = values.max() if values.size else 0.0
    if low < 0 or high > 255:
        raise ValueError(
            f"{key} of {path!r} must hold pixel values in [0, 255] (or "
            f"floats in [0, 1]). Received values in [{low}, {high}].")
    scaled = bool(images.dtype.kind == "f" and high <= 1.0)
    if scaled:
        logging.info("%s of %s holds floats in [0, 1]: multiplied by 255.",
                     key, path)
        values = values * 255.0
    return np.rint(values).astype("uint8"), scaled


def _checked_labels(labels, key, path):
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    integral = labels.dtype.kind in "iu" or (
        labels.dtype.kind == "f" and np.all(np.isfinite(labels))
        and np.all(labels == np.round(labels)))
    if labels.ndim != 1 or not integral:
        raise ValueError(
            f"{key} of {path!r} must hold integer class ids, shape (num,). "
            f"Received shape {labels.shape} of dtype {labels.dtype}.")
    if labels.size and labels.min() < 0:
        raise ValueError(
            f"{key} of {path!r} must hold class ids from 0. Received "
            f"{labels.min()}.")
    # Checked before the cast, which would wrap a larger id around.
    if labels.size and labels.max() > _MAX_CLASS_ID:
        raise ValueError(
            f"{key} of {path!r} must hold class ids up to {_MAX_CLASS_ID}. "
            f"Received {labels.max()}.")
    return labels.astype("int64")


def _check_same_shape(splits, path):
    train_shape = splits["train"][0].shape[1:]
    test_shape = splits["test"][0].shape[1:]
    if train_shape != test_shape:
        raise ValueError(
            f"x_train and x_test of {path!r} hold images of different "
            f"shapes: {train_shape} and {test_shape}.")
    for split in ("train", "test"):
        if not len(splits[split][1]):
            raise ValueError(f"x_{split} of {path!r} holds no images.")


def _class_names(arrays, splits, path):
    largest = max(int(labels.max()) for _, labels in splits.values()
                  if labels.size)
    if "class_names" not in arrays:
        if largest < 1:
            raise ValueError(
                f"The labels of {path!r} hold one class only (0); a "
                "classifier needs at least 2 classes.")
        _check_every_class_trained(splits, largest, path)
        return tuple(str(index) for index in range(largest + 1))
    names = arrays["class_names"]
    if names.ndim != 1 or names.dtype.kind not in "USO":
        raise ValueError(
            f"class_names of {path!r} must be a 1-D array of strings. "
            f"Received shape {names.shape} of dtype {names.dtype}.")
    if largest >= len(names):
        raise ValueError(
            f"The labels of {path!r} go up to {largest}, but class_names "
            f"holds {len(names)} names; labels must lie in [0, "
            f"{len(names)}).")
    return tuple(check_class_names([str(name) for name in names],
                                   f"class_names of {path!r}"))


def _check_every_class_trained(splits, largest, path):
    """Without `class_names` the classes are the ids 0 to the largest
    label: each must have training images (a stray label would otherwise
    add classes a model can never learn, a billion of them for a label of
    10**9)."""
    trained = np.unique(splits["train"][1])
    missing = largest + 1 - len(trained)
    if missing:
        first = np.setdiff1d(np.arange(min(largest + 1, len(trained) + 6)),
                             trained)[:5]
        raise ValueError(
            f"The labels of {path!r} go up to {largest}, but {missing} of "
            f"the classes 0-{largest} have no training image (the first: "
            f"{first.tolist()}). Without class_names the class ids must be "
            "0, 1, ..., N-1, each with training images; fix the stray "
            "labels, or give class_names.")


def _converted_shape(shape, image_size, color_mode):
    height, width, channels = shape
    if image_size is not None:
        height, width = image_size
    if color_mode is not None:
        channels = image_arrays.CHANNELS[color_mode]
    return height, width, channels


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
