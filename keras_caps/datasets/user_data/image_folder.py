"""Reads a user's dataset from a folder of class subfolders (`folder:PATH`).

```
PATH/
  cat/   1.png  2.jpg  more/3.bmp ...
  dog/   a.gif  b.jpeg ...
```

Each subfolder (hidden ones aside) is a class; class names are the folder
names, sorted, as in `keras.utils.image_dataset_from_directory`. The images
of a class are its files with an `IMAGE_EXTENSIONS` extension, its
subfolders included, in sorted path order. Every file is decoded once, up
front, with `keras_caps.inference.image_files.read_image`, into a uint8 array
held in memory (`num_images * height * width * channels` bytes; the size
is checked against the memory available before decoding,
`image_memory.check_fits_in_memory`). A file that cannot be decoded
(truncated, corrupt, not an image) is skipped: a warning gives the count
and the first few names, so training never meets it.

`image_size` defaults to the size of the images when they all share one;
`color_mode` defaults to "grayscale" when every file is stored as a
grayscale image (PIL modes "1", "L", "LA", "I", "I;16", "F"), else "rgb".
"""

import hashlib
import logging
import os

import numpy as np
from PIL import Image

from keras_caps.datasets.user_data import image_arrays
from keras_caps.datasets.user_data import image_memory
from keras_caps.inference import image_files

_GRAYSCALE_MODES = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F")
_NAMES_SHOWN = 5


def read_image_folder(path, *, image_size=None, color_mode=None,
                      class_names=None, argument="dataset"):
    """Decodes every image of a folder of class subfolders.

    Args:
        path: str. The folder.
        image_size: `(height, width)` or None: the images' common size.
        color_mode: "grayscale", "rgb" or None: grayscale when every file
            is grayscale, else rgb.
        class_names: sequence of str or None. When given (for a test
            folder), the folder must hold exactly these classes.
        argument: str. The argument named in errors (`"dataset"`,
            `"test_dir"`).

    Returns:
        An `ImageArrays` with `test=None`; its `source` records the
        folder, the size and colour mode, the files skipped and a
        fingerprint (file count, total bytes, SHA-256 of the files' paths
        and contents).

    Raises:
        ValueError: no such folder, no class subfolders, fewer than 2
            classes, a class folder without images (before or after the
            unreadable files are skipped), other classes than
            `class_names`, images of different sizes without
            `image_size`, or more images than memory allows.

    Example:

    >>> arrays = read_image_folder("my_images")  # doctest: +SKIP
    >>> arrays.class_names  # doctest: +SKIP
    ('cat', 'dog')
    """
    path = os.path.abspath(os.fspath(path))
    files = _class_files(path, argument)
    if class_names is not None:
        _check_class_names(files, class_names, path, argument)
    headers, unreadable = _headers(files)
    _check_no_class_empty(np.array([label for _, label, _, _ in headers],
                                   "int64"), files, path, argument)
    image_size = image_size or _common_size(headers, path, argument)
    color_mode = color_mode or _color_mode(headers)
    channels = image_arrays.CHANNELS[color_mode]
    needed = image_memory.check_fits_in_memory(
        len(headers), (*image_size, channels), f"{argument} {path!r}")
    logging.info("Decoding %d images of %s into memory (%.1f MiB).",
                 len(headers), path, needed / 2 ** 20)
    images, labels, paths = _decode(headers, image_size, color_mode,
                                    unreadable)
    _report_unreadable(unreadable, path)
    _check_no_class_empty(labels, files, path, argument)
    source = {"kind": "folder", "path": path,
              "image_size": list(image_size), "color_mode": color_mode,
              "skipped_files": len(unreadable),
              "fingerprint": _fingerprint(paths, path)}
    return image_arrays.ImageArrays(train=(images, labels), test=None,
                                    class_names=tuple(files),
                                    source=source)


def _class_files(path, argument):
    """dict class name -> sorted image paths, classes in sorted order."""
    if not os.path.isdir(path):
        raise ValueError(
            f"Received an invalid value for `{argument}`: {path!r} is not "
            "a folder (expected a folder of class subfolders of images).")
    names = sorted(name for name in os.listdir(path)
                   if not name.startswith(".")
                   and os.path.isdir(os.path.join(path, name)))
    loose = image_files.list_image_files(path)
    if loose:
        logging.warning(
            "%d image files lie directly in %s, outside any class "
            "subfolder; they are ignored: %s", len(loose), path,
            ", ".join(os.path.basename(name) for name in loose[:5]))
    if len(names) < 2:
        raise ValueError(
            f"Received an invalid value for `{argument}`: {path!r} holds "
            f"{len(names)} class subfolders ({names}); a classifier needs "
            "at least 2 (one subfolder of images per class).")
    files = {name: image_files.list_image_files(
        os.path.join(path, name), recursive=True) for name in names}
    empty = [name for name in names if not files[name]]
    if empty:
        raise ValueError(
            f"Received an invalid value for `{argument}`: the class folders "
            f"{empty} of {path!r} hold no image files (expected "
            f"{', '.join(image_files.IMAGE_EXTENSIONS)}). Add images or "
            "move those folders out.")
    return files


def _check_class_names(files, class_names, path, argument):
    found, expected = list(files), list(class_names)
    if found != expected:
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        raise ValueError(
            f"Received an invalid value for `{argument}`: the classes of "
            f"{path!r} differ from the training classes. Missing there: "
            f"{missing}; not in the training data: {extra}.")


def _headers(files):
    """`[(path, label, (height, width), mode)]`, and the unreadable paths."""
    headers, unreadable = [], []
    for label, name in enumerate(files):
        for file in files[name]:
            try:
                with Image.open(file) as image:
                    size, mode = image.size, image.mode
            except (OSError, SyntaxError, ValueError, EOFError,
                    Image.DecompressionBombError):
                unreadable.append(file)
                continue
            headers.append((file, label, (size[1], size[0]), mode))
    return headers, unreadable


def _common_size(headers, path, argument):
    sizes = sorted({size for _, _, size, _ in headers})
    if len(sizes) == 1:
        return sizes[0]
    shown = ", ".join(f"{height}x{width}" for height, width in sizes[:5])
    raise ValueError(
        f"The images of {path!r} (`{argument}`) have {len(sizes)} different "
        f"sizes (height x width: {shown}...). Pass `image_size` "
        "(--image-size 28, or HEIGHT,WIDTH such as 32,24) to resize them "
        "all to one size.")


def _color_mode(headers):
    if all(mode in _GRAYSCALE_MODES for _, _, _, mode in headers):
        return "grayscale"
    return "rgb"


def _decode(headers, image_size, color_mode, unreadable):
    """Decodes the files into one preallocated uint8 array."""
    channels = image_arrays.CHANNELS[color_mode]
    images = np.empty((len(headers), *image_size, channels), "uint8")
    labels = np.empty(len(headers), "int64")
    paths, count = [], 0
    for file, label, _, _ in headers:
        try:
            images[count] = image_files.read_image(file, image_size,
                                                   color_mode)
        except image_files.UnreadableImageError:
            unreadable.append(file)
            continue
        labels[count] = label
        paths.append(file)
        count += 1
    return images[:count], labels[:count], paths


def _report_unreadable(unreadable, path):
    if not unreadable:
        return
    shown = sorted(os.path.relpath(file, path) for file in unreadable)
    logging.warning(
        "Skipped %d image files of %s that cannot be decoded (truncated, "
        "corrupt or not images): %s%s", len(unreadable), path,
        ", ".join(shown[:_NAMES_SHOWN]),
        " ..." if len(shown) > _NAMES_SHOWN else "")


def _check_no_class_empty(labels, files, path, argument):
    counts = np.bincount(labels, minlength=len(files))
    empty = [name for name, count in zip(files, counts, strict=True)
             if count == 0]
    if empty:
        raise ValueError(
            f"Received an invalid value for `{argument}`: no image of the "
            f"class folders {empty} of {path!r} can be decoded (every file "
            "there is truncated, corrupt or not an image).")


def _fingerprint(paths, root):
    digest = hashlib.sha256()
    total = 0
    for file in paths:
        with open(file, "rb") as handle:
            data = handle.read()
        total += len(data)
        digest.update(os.path.relpath(file, root).encode() + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return {"files": len(paths), "bytes": total,
            "sha256": digest.hexdigest()}
