"""The in-memory images of a dataset a user brings, and their conversion.

Every reader of a user's data (`image_folder`, `npz_arrays`,
`tfds_images`) decodes the whole dataset once, up front, into uint8
arrays, so that a corrupt example fails (or is skipped) before training
rather than halfway through an epoch. `ImageArrays` holds the result.

`convert_images` applies the conversion rules of
`keras_caps.inference.image_files.read_image` (ITU-R 601-2 luma for
grayscale, channel repetition for RGB, PIL's bilinear resizing) to images
that are already arrays, so a model trained on a `.npz` file or a TFDS
dataset sees its images as `keras-caps predict` will show it image files.
"""

import dataclasses

import numpy as np
from PIL import Image

from keras_caps.inference import image_files

CHANNELS = {"grayscale": 1, "rgb": 3}


@dataclasses.dataclass(frozen=True)
class ImageArrays:
    """The decoded images and labels of a user's dataset.

    Args:
        train: `(images, labels)`: uint8 `(num_train, height, width,
            channels)` and int64 `(num_train,)` class ids.
        test: `(images, labels)` of the test data, or `None` when the
            source has none (a folder without `test_dir`: the test data
            is then carved out of `train`).
        class_names: tuple of str, indexed by class id.
        source: dict, JSON-able: where the data came from and a content
            fingerprint (see `UserDataset.source_record`).

    Example:

    >>> arrays = ImageArrays(
    ...     train=(np.zeros((2, 4, 4, 1), "uint8"), np.array([0, 1])),
    ...     test=None, class_names=("cat", "dog"), source={})
    >>> arrays.class_names
    ('cat', 'dog')
    """

    train: tuple
    test: tuple
    class_names: tuple
    source: dict


def check_image_size(image_size):
    """`image_size` as `(height, width)`, or None; an int means a square.

    Example:

    >>> check_image_size(28), check_image_size([32, 48])
    ((28, 28), (32, 48))
    """
    if isinstance(image_size, (int, np.integer)) and not isinstance(
            image_size, bool):
        image_size = (image_size, image_size)
    return image_files.check_image_size(image_size)


def check_color_mode(color_mode):
    """Raises unless `color_mode` is None, "grayscale" or "rgb"."""
    if color_mode is not None and color_mode not in CHANNELS:
        raise ValueError(
            "Received an invalid value for `color_mode`, expected one of "
            f"{sorted(CHANNELS)} or None. Received: color_mode="
            f"{color_mode!r}")
    return color_mode


def convert_images(images, image_size, color_mode):
    """Converts uint8 images to a size and colour mode, as image files are.

    Images that already have the size and channels are returned unchanged
    (no copy); otherwise each image goes through PIL: `convert("L")` for
    grayscale (ITU-R 601-2 luma), channel repetition for RGB, and a
    bilinear resize.

    Args:
        images: uint8 array `(num_images, height, width, channels)`,
            channels 1 or 3.
        image_size: `(height, width)` or None (keep the size).
        color_mode: "grayscale", "rgb" or None (keep the channels).

    Returns:
        uint8 array `(num_images, new_height, new_width, new_channels)`.

    Example:

    >>> rgb = np.full((2, 4, 4, 3), 100, "uint8")
    >>> convert_images(rgb, (2, 2), "grayscale").shape
    (2, 2, 2, 1)
    """
    num_images, height, width, channels = images.shape
    size = image_size or (height, width)
    new_channels = CHANNELS[color_mode] if color_mode else channels
    if size == (height, width) and new_channels == channels:
        return images
    converted = np.empty((num_images, *size, new_channels), "uint8")
    mode = "L" if new_channels == 1 else "RGB"
    for index in range(num_images):
        image = images[index]
        image = Image.fromarray(image[..., 0] if channels == 1 else image,
                                "L" if channels == 1 else "RGB")
        image = image.convert(mode)
        if image.size != (size[1], size[0]):
            image = image.resize((size[1], size[0]),
                                 Image.Resampling.BILINEAR)
        converted[index] = np.asarray(image, "uint8").reshape(
            *size, new_channels)
    return converted
