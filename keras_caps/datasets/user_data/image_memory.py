"""Whether a user's dataset fits in memory once decoded.

The images of a dataset a user brings are decoded into uint8 arrays up
front and then copied by the `tf.data` pipeline (one tensor of the arrays,
the selected split, and its `cache()`): about `MEMORY_COPIES` times the
decoded size while training. `check_fits_in_memory` refuses, before
anything is decoded, a dataset whose decoded images would take more than
`MEMORY_FRACTION` of the memory available now, divided by the copies.
"""

import os

MEMORY_FRACTION = 0.5
MEMORY_COPIES = 4
_MEBIBYTE = 2 ** 20


def available_memory_bytes():
    """The memory available now (`os.sysconf`), or None where unknown.

    Example:

    >>> available_memory_bytes() is None or available_memory_bytes() > 0
    True
    """
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_in_memory(num_images, image_shape, what):
    """Raises a `ValueError` when the decoded images would not fit.

    Args:
        num_images: int. Images to decode.
        image_shape: `(height, width, channels)` of one decoded image.
        what: str. The data, for the message (e.g. "folder:/data/cats").

    Returns:
        int, the bytes the decoded uint8 images take.

    Example:

    >>> check_fits_in_memory(10, (28, 28, 1), "npz:digits.npz")
    7840
    """
    height, width, channels = image_shape
    needed = int(num_images) * int(height) * int(width) * int(channels)
    available = available_memory_bytes()
    if available is None:
        return needed
    limit = MEMORY_FRACTION * available / MEMORY_COPIES
    if needed > limit:
        raise ValueError(
            f"The images of {what} do not fit in memory: {num_images} "
            f"images of {height}x{width}x{channels} take "
            f"{needed / _MEBIBYTE:.0f} MiB decoded and about "
            f"{MEMORY_COPIES}x that while training, more than "
            f"{MEMORY_FRACTION:.0%} of the {available / _MEBIBYTE:.0f} MiB "
            "of memory available. Pass a smaller `image_size` "
            "(--image-size), `color_mode='grayscale'` (--color-mode "
            "grayscale) or fewer images.")
    return needed


def check_arrays_fit_in_memory(num_bytes, what):
    """Raises a `ValueError` when arrays of `num_bytes` (their size as
    stored, uncompressed) would take more than `MEMORY_FRACTION` of the
    memory available now: checked from an archive's headers, before
    anything is decompressed.

    Example:

    >>> check_arrays_fit_in_memory(7840, "npz:digits.npz")
    7840
    """
    available = available_memory_bytes()
    if available is not None and num_bytes > MEMORY_FRACTION * available:
        raise ValueError(
            f"The arrays of {what} do not fit in memory: they take "
            f"{num_bytes / _MEBIBYTE:.0f} MiB uncompressed, more than "
            f"{MEMORY_FRACTION:.0%} of the {available / _MEBIBYTE:.0f} MiB "
            "of memory available. Use fewer or smaller images (uint8 "
            "pixels take an eighth of float64 ones), or a folder of image "
            "files.")
    return int(num_bytes)
