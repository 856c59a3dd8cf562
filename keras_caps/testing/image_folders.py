"""Writes tiny folders of labelled image files, for tests and examples."""

import os

import numpy as np
from PIL import Image

_PIL_FORMATS = {"png": "PNG", "jpg": "JPEG", "jpeg": "JPEG", "bmp": "BMP",
                "gif": "GIF"}


def class_image(class_index, size=(16, 16), seed=0):
    """An easy uint8 image `(height, width)` of class `class_index`.

    Faint noise (0-39) with a bright square (255) in cell `class_index` of
    a 4x4 grid over the image, row by row: a tiny model learns 16 classes
    from it.

    Example:

    >>> image = class_image(1, size=(16, 16))
    >>> int(image[0:4, 4:8].min()), int(image[0:4, 0:4].max()) < 40
    (255, True)
    """
    height, width = size
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 40, (height, width)).astype("uint8")
    cell_height, cell_width = max(height // 4, 1), max(width // 4, 1)
    row = (class_index % 16) // 4 * cell_height
    column = class_index % 4 * cell_width
    image[row:row + cell_height, column:column + cell_width] = 255
    return image


def write_image_folder(root, class_counts, size=(16, 16),
                       formats=("png", "jpg"), colors=("L", "RGB"), seed=0):
    """Writes `root/<class>/<i>.<format>` image files of `class_image`s.

    Classes are numbered in sorted name order (the order of
    `keras.utils.image_dataset_from_directory`). File `i` of a class uses
    `formats[i % len(formats)]` and `colors[(i // len(formats)) %
    len(colors)]`, so a few files mix PNG and JPEG, grayscale and RGB. An
    RGB image carries the same pixels in all three channels, so it reads
    back as the grayscale one.

    Args:
        root: str or path-like. Created if missing.
        class_counts: dict, class name -> number of files (may be 0: an
            empty class folder).
        size: `(height, width)` of every image.
        formats: file formats among "png", "jpg", "jpeg", "bmp", "gif".
        colors: PIL modes among "L" and "RGB".
        seed: int. Seeds the noise; file `i` of a class uses `seed + i`.

    Returns:
        dict, class name -> sorted list of the file paths written.

    Example:

    >>> paths = write_image_folder(  # doctest: +SKIP
    ...     tmp_path, {"cat": 3, "dog": 2}, formats=("png", "jpg"))
    >>> [os.path.basename(p) for p in paths["cat"]]  # doctest: +SKIP
    ['0.png', '1.jpg', '2.png']
    """
    root = os.fspath(root)
    paths = {}
    for class_index, name in enumerate(sorted(class_counts)):
        folder = os.path.join(root, name)
        os.makedirs(folder, exist_ok=True)
        paths[name] = []
        for i in range(class_counts[name]):
            extension = formats[i % len(formats)]
            color = colors[(i // len(formats)) % len(colors)]
            pixels = class_image(class_index, size, seed + i)
            image = Image.fromarray(pixels, "L").convert(color)
            path = os.path.join(folder, f"{i}.{extension}")
            image.save(path, _PIL_FORMATS[extension.lower()])
            paths[name].append(path)
        paths[name].sort()
    return paths


def write_truncated_image(path, size=(16, 16)):
    """Writes a PNG file cut off halfway: its header reads, its pixels not.

    Example:

    >>> write_truncated_image(tmp_path / "cat" / "broken.png")  # doctest: +SKIP
    """
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    # Noise compresses badly, so the image data spans many bytes.
    pixels = rng.integers(0, 256, size).astype("uint8")
    Image.fromarray(pixels, "L").save(path, "PNG")
    with open(path, "rb") as file:
        data = file.read()
    with open(path, "wb") as file:
        file.write(data[:len(data) // 2])
    return path


def write_non_image(path):
    """Writes a text file under an image name (e.g. `notes.png`).

    Example:

    >>> write_non_image(tmp_path / "cat" / "notes.png")  # doctest: +SKIP
    """
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as file:
        file.write("This is not an image.\n")
    return path
