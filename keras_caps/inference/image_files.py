"""Reads image files (PNG, JPEG, BMP, GIF) into uint8 NumPy arrays.

NumPy and Pillow only, no TensorFlow: the same reader serves the training
pipeline of a folder of images and `keras-caps predict`, on every Keras
backend, so an image is converted and resized the same way in both.

Conversion rules (`read_image`):

- GIF and other animations: the first frame.
- `color_mode="grayscale"`: colour images become one channel with PIL's
  `convert("L")`, the ITU-R 601-2 luma `L = R * 299/1000 + G * 587/1000 +
  B * 114/1000`.
- `color_mode="rgb"`: grayscale images are repeated over three channels.
- Alpha (and palette transparency) is dropped: the colour stored under a
  transparent pixel is kept, as `tf.io.decode_image(..., channels=3)` does.
- 16-bit images are scaled to 8 bits (`value * 255 / 65535`, rounded).
- Resizing (`image_size`) uses PIL's bilinear filter
  (`Image.Resampling.BILINEAR`, `RESIZE_INTERPOLATION`), applied to the
  8-bit image after the colour conversion; when shrinking, PIL widens the
  filter to the scale factor (antialiasing).
"""

import logging
import os

import numpy as np
from PIL import Image

# Lower case; file names are matched case-insensitively.
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
COLOR_MODES = ("grayscale", "rgb")
RESIZE_INTERPOLATION = "bilinear"

_CHANNELS = {"grayscale": 1, "rgb": 3}
_SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")


class UnreadableImageError(ValueError):
    """An image file that cannot be decoded: truncated, corrupt, or no image.

    A `ValueError` whose message names the file and the reason; `path` and
    `reason` hold them.

    Example:

    >>> error = UnreadableImageError("cats/1.png", "image file is truncated")
    >>> str(error)
    "Cannot read the image file 'cats/1.png': image file is truncated."
    >>> isinstance(error, ValueError)
    True
    """

    def __init__(self, path, reason):
        self.path = os.fspath(path)
        self.reason = str(reason).rstrip(".")
        super().__init__(
            f"Cannot read the image file {self.path!r}: {self.reason}.")


def is_image_file(path):
    """Whether `path` ends with one of `IMAGE_EXTENSIONS` (any letter case).

    Example:

    >>> is_image_file("cats/1.JPG"), is_image_file("notes.txt")
    (True, False)
    """
    return os.fspath(path).lower().endswith(IMAGE_EXTENSIONS)


def list_image_files(folder, recursive=False):
    """The image files of `folder`, sorted by path; hidden files skipped.

    Args:
        folder: str or path-like. An existing folder.
        recursive: bool. Also list the files of its subfolders.

    Returns:
        list of str paths, `folder` joined with the file name.

    Raises:
        FileNotFoundError: `folder` is not a folder.

    Example:

    >>> list_image_files("my_images/cat")  # doctest: +SKIP
    ['my_images/cat/1.png', 'my_images/cat/2.jpg']
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"No folder {folder!r}.")
    found, special = [], []
    for parent, subfolders, names in os.walk(folder):
        subfolders[:] = sorted(name for name in subfolders
                               if not name.startswith("."))
        for name in names:
            if name.startswith(".") or not is_image_file(name):
                continue
            path = os.path.join(parent, name)
            # Only regular files: opening a FIFO (a named pipe) would wait
            # for a writer forever.
            (found if os.path.isfile(path) else special).append(path)
        if not recursive:
            break
    if special:
        logging.warning(
            "Skipped %d image names in %s that are not regular files "
            "(named pipes, sockets, devices or broken links): %s",
            len(special), folder, ", ".join(sorted(special)[:5]))
    return sorted(found)


def read_image(path, image_size=None, color_mode="grayscale"):
    """Reads an image file into a uint8 array `(height, width, channels)`.

    The module docstring lists the conversion rules (first GIF frame,
    ITU-R 601-2 luma for grayscale, alpha dropped, 16-bit scaled to 8,
    bilinear resizing).

    Args:
        path: str or path-like. A PNG, JPEG, BMP or GIF file (the content
            decides the format, not the extension).
        image_size: `(height, width)` of positive ints, or None to keep the
            file's size.
        color_mode: `"grayscale"` (1 channel) or `"rgb"` (3 channels).

    Returns:
        uint8 NumPy array `(height, width, 1)` or `(height, width, 3)`.

    Raises:
        FileNotFoundError: no file at `path`.
        UnreadableImageError: the file is truncated, corrupt or no image.
        ValueError, TypeError: a bad `image_size` or `color_mode`.

    Example:

    >>> read_image("cat/1.png", image_size=(28, 28)).shape  # doctest: +SKIP
    (28, 28, 1)
    """
    channels = _checked_channels(color_mode)
    size = check_image_size(image_size)
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No image file {path!r}.")
    image = _decoded(path)
    image = _eight_bit(image, path)
    image = image.convert("L" if channels == 1 else "RGB")
    if size is not None and image.size != (size[1], size[0]):
        image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
    pixels = np.asarray(image, dtype="uint8")
    # (height, width) for "L", (height, width, 3) for "RGB".
    return pixels.reshape(pixels.shape[0], pixels.shape[1], channels)


def check_image_size(image_size):
    """`image_size` as a `(height, width)` tuple of ints, or None.

    Raises:
        TypeError, ValueError: not None nor two positive integers; the
            message names `image_size` and what it received.

    Example:

    >>> check_image_size([28, 32])
    (28, 32)
    """
    if image_size is None:
        return None
    if isinstance(image_size, (str, bytes)) or not hasattr(
            image_size, "__len__"):
        raise TypeError(
            "image_size must be (height, width), two positive integers; "
            f"received {image_size!r}.")
    values = tuple(image_size)
    if len(values) != 2 or not all(
            isinstance(value, (int, np.integer))
            and not isinstance(value, bool) and value > 0
            for value in values):
        raise ValueError(
            "image_size must be (height, width), two positive integers; "
            f"received {image_size!r}.")
    return int(values[0]), int(values[1])


def _checked_channels(color_mode):
    if color_mode not in _CHANNELS:
        raise ValueError(
            f"color_mode must be one of {COLOR_MODES}; received "
            f"{color_mode!r}.")
    return _CHANNELS[color_mode]


def _decoded(path):
    """The first frame of the image at `path`, fully decoded."""
    try:
        with Image.open(path) as image:
            image.seek(0)
            image.load()
            # `copy` keeps the pixels after the file is closed.
            return image.copy()
    except Image.DecompressionBombError as error:
        raise UnreadableImageError(path, error) from None
    except Image.UnidentifiedImageError:
        raise UnreadableImageError(
            path, "not an image file Pillow can decode (expected PNG, JPEG, "
            "BMP or GIF)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        reason = str(error) or type(error).__name__
        raise UnreadableImageError(path, reason) from None


def _eight_bit(image, path):
    """`image` as an 8-bit "L" or "RGB" image, alpha dropped."""
    if image.mode in ("L", "RGB"):
        return image
    if image.mode in _SIXTEEN_BIT_MODES or image.mode in ("I", "F"):
        return Image.fromarray(_scaled_to_eight_bits(image, path), "L")
    if image.mode == "LA":
        return image.getchannel("L")
    if image.mode in ("P", "PA"):
        # Through RGBA: PIL warns when a palette with transparency goes to
        # RGB directly; the alpha is dropped below as for any RGBA image.
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "RGBa", "RGBX"):
        return Image.merge("RGB", image.split()[:3])
    if image.mode == "1":
        return image.convert("L")
    return image.convert("RGB")  # CMYK, YCbCr, LAB, ...


def _scaled_to_eight_bits(image, path):
    values = np.asarray(image).astype("float64")
    if not np.all(np.isfinite(values)) or values.min() < 0:
        raise UnreadableImageError(
            path, f"pixel values outside 0-65535 (mode {image.mode})")
    if image.mode in _SIXTEEN_BIT_MODES or values.max() > 255:
        values = values * 255.0 / 65535.0
    return np.clip(np.rint(values), 0, 255).astype("uint8")
