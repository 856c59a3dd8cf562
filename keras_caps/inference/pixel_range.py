"""The input contract of the applications: raw pixels in [0, 255]."""

import numpy as np

from keras_caps.api_export import keras_caps_export


@keras_caps_export("keras_caps.inference.check_pixel_range")
def check_pixel_range(images, name="images"):
    """Raises unless `images` look like the raw pixels the models expect.

    Every keras_caps application scales its input itself (its
    `input_scaling` layer) and expects raw pixels in [0, 255]. Images
    already scaled to [0, 1], the most common mistake, give plausible but
    wrong scores, so they are refused: every value in [0, 1] with at least
    one above 0 is taken for scaled images (a batch that is entirely black
    passes). NaN and infinite values are refused as well. `keras-caps
    evaluate` and `keras-caps plot` check the test images they read; a
    SavedModel exported with `input_range="unit"` takes [0, 1] images.

    Args:
        images: array-like of images, e.g. `(batch, height, width,
            channels)`.
        name: str. What the images are, for the error message.

    Returns:
        `images`, unchanged.

    Raises:
        ValueError: the images hold NaN or infinite values, or look scaled
            to [0, 1].

    Example:

    >>> _ = check_pixel_range(np.array([[0.0, 128.0, 255.0]]))
    >>> check_pixel_range(np.array([[0.0, 0.5, 1.0]]))
    Traceback (most recent call last):
    ...
    ValueError: `images` look scaled to [0, 1], ...
    """
    values = np.asarray(images, dtype="float64")
    if not np.isfinite(values).all():
        raise ValueError(
            f"`{name}` hold NaN or infinite values; the models expect "
            "finite raw pixels in [0, 255]. Received: "
            f"{int(np.size(values) - np.isfinite(values).sum())} non-finite "
            f"values among {np.size(values)}")
    if values.size and values.min() >= 0.0 and 0.0 < values.max() <= 1.0:
        raise ValueError(
            f"`{name}` look scaled to [0, 1], but the models expect raw "
            "pixels in [0, 255] (they scale their input themselves): "
            "multiply them by 255, or serve [0, 1] images through an "
            "export made with `input_range=\"unit\"` (`keras-caps export "
            "--input-range unit`). Received: values from "
            f"{values.min():g} to {values.max():g}")
    return images
