"""Seeded, deterministic image corruptions for robustness evaluations.

Every function takes a batch of images in raw pixel units (float, 0-255,
shape `(batch, height, width, channels)`, as `keras_caps.datasets` yields
them) and a seed, and returns a new array; the same images and seed give
the same result on every machine (NumPy's PCG64 generator).

- `gaussian_noise`: additive Gaussian noise, `stddev` a fraction of the
  pixel range.
- `pixel_corruption`: a fraction of the pixels replaced by uniform noise
  (the "noise injection" of the attention-routing experiments).
- `occlusion`: a random square patch blanked (set to 0).
- `affine_test_set`: an affNIST-style set generated from 28 x 28 digits,
  for the test of Sabour et al. (2017, Section 5.2): each digit rotated
  (up to 20 degrees either way), sheared (up to 0.2 either way), scaled
  (0.8-1.2 per axis, independently) and translated anywhere that keeps
  it on a 40 x 40 canvas, the ranges affNIST's transformations are drawn
  from (Tieleman, 2013), sampled by inverse mapping with bilinear
  interpolation. It is generated here, not the affNIST files
  (`keras_caps.datasets.affnist` reads those).
- `translated_test_set`: the clean canvas test images with each digit
  moved to a random position on the canvas, nothing else changed: the
  training distribution of Sabour et al. (2017, Section 5.2), a
  translated-only test beside the affine one.

References:
- [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
- [Tieleman, 2013, affNIST](https://www.cs.toronto.edu/~tijmen/affNIST/)
"""

import math
import numbers

import numpy as np

# affNIST's ranges (Tieleman, 2013): rotation within +-20 degrees, shear
# within +-0.2, each axis scaled by 0.8 to 1.2, translated anywhere the
# digit stays on the 40 x 40 canvas.
MAX_ROTATION_DEGREES = 20.0
MAX_SHEAR = 0.2
SCALE_RANGE = (0.8, 1.2)
CANVAS_SIZE = 40
PIXEL_RANGE = 255.0
_AFFINE_CHUNK = 1000


def gaussian_noise(images, stddev, seed):
    """Adds Gaussian noise of `stddev` (a fraction of 255), clipped.

    ```
    corrupted = clip(images + 255 * stddev * N(0, 1), 0, 255)
    ```

    Args:
        images: float array `(batch, height, width, channels)`, 0-255.
        stddev: float in [0, 1]. The noise's standard deviation as a
            fraction of the pixel range.
        seed: int.

    Returns:
        float32 array of the shape of `images`.

    Example:

    >>> noisy = gaussian_noise(np.full((1, 4, 4, 1), 128.0), 0.1, seed=0)
    >>> noisy.shape
    (1, 4, 4, 1)
    """
    images = _check_images(images)
    stddev = check_severity("noise", stddev)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(images.shape, dtype=np.float32)
    return np.clip(images + PIXEL_RANGE * stddev * noise, 0.0,
                   PIXEL_RANGE).astype("float32")


def pixel_corruption(images, fraction, seed):
    """Replaces `fraction` of each image's pixels by uniform noise.

    In every image, `round(fraction * height * width)` pixel positions are
    drawn without replacement; each channel of those pixels becomes a
    uniform draw in [0, 255].

    Args:
        images: float array `(batch, height, width, channels)`, 0-255.
        fraction: float in [0, 1].
        seed: int.

    Returns:
        float32 array of the shape of `images`.

    Example:

    >>> out = pixel_corruption(np.zeros((1, 10, 10, 1)), 0.2, seed=0)
    >>> int(np.count_nonzero(out))
    20
    """
    images = _check_images(images)
    fraction = check_severity("pixels", fraction)
    batch, height, width, channels = images.shape
    count = int(round(fraction * height * width))
    rng = np.random.default_rng(seed)
    # A random permutation per image; its first `count` positions.
    keys = rng.random((batch, height * width))
    chosen = np.argsort(keys, axis=1)[:, :count]  # (batch, count)
    values = rng.uniform(0.0, PIXEL_RANGE, (batch, count, channels))
    corrupted = images.reshape(batch, height * width, channels).copy()
    np.put_along_axis(corrupted, chosen[..., None], values.astype("float32"),
                      axis=1)
    return corrupted.reshape(images.shape)


def occlusion(images, size, seed):
    """Blanks a random `size` x `size` square of each image (sets it to 0).

    The square lies inside the image; its top-left corner is uniform over
    the positions that allow it, per image. Every channel is blanked.

    Args:
        images: float array `(batch, height, width, channels)`, 0-255.
        size: int in [0, min(height, width)].
        seed: int.

    Returns:
        float32 array of the shape of `images`.

    Example:

    >>> out = occlusion(np.ones((1, 8, 8, 1)), 3, seed=0)
    >>> int((out == 0).sum())
    9
    """
    images = _check_images(images)
    batch, height, width, _ = images.shape
    size = check_severity("occlusion", size, image_size=min(height, width))
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, height - size + 1, batch)
    cols = rng.integers(0, width - size + 1, batch)
    row_index = np.arange(height)[None, :, None]
    col_index = np.arange(width)[None, None, :]
    inside = ((row_index >= rows[:, None, None])
              & (row_index < rows[:, None, None] + size)
              & (col_index >= cols[:, None, None])
              & (col_index < cols[:, None, None] + size))  # (b, h, w)
    return np.where(inside[..., None], 0.0, images).astype("float32")


def check_severity(kind, severity, image_size=None):
    """`severity` checked for a corruption `kind`; a clear error otherwise.

    `"noise"` and `"pixels"` take a number in [0, 1]; `"occlusion"` an
    integer patch side in [0, `image_size`].
    """
    if kind == "occlusion":
        if (isinstance(severity, bool)
                or not isinstance(severity, numbers.Integral)):
            raise TypeError(
                "Received an invalid type for the occlusion size, expected "
                f"an integer number of pixels. Received: {severity!r}")
        maximum = image_size if image_size is not None else math.inf
        if not 0 <= severity <= maximum:
            raise ValueError(
                "Received an invalid occlusion size, expected an integer in "
                f"[0, {maximum}] (the image side). Received: {severity!r}")
        return int(severity)
    if kind not in ("noise", "pixels"):
        raise ValueError(
            "Unknown corruption. Expected one of ['noise', 'occlusion', "
            f"'pixels']. Received: {kind!r}")
    if (isinstance(severity, bool)
            or not isinstance(severity, numbers.Real)):
        raise TypeError(
            f"Received an invalid type for the {kind} severity, expected a "
            f"number in [0, 1]. Received: {severity!r}")
    if not 0.0 <= float(severity) <= 1.0:
        raise ValueError(
            f"Received an invalid {kind} severity, expected a number in "
            f"[0, 1] (a fraction of the pixel range for noise, of the "
            f"pixels for pixels). Received: {severity!r}")
    return float(severity)


def random_affine_parameters(num_images, seed,
                             max_rotation_degrees=MAX_ROTATION_DEGREES,
                             max_shear=MAX_SHEAR, scale_range=SCALE_RANGE):
    """Draws the affNIST-style transform of each image.

    Returns:
        dict of float64 arrays `(num_images,)`: `"rotation"` (radians,
        uniform in +-max_rotation_degrees), `"shear"` (uniform in
        +-max_shear), `"scale_x"` and `"scale_y"` (uniform in
        `scale_range`), and `"translation_u"`, `"translation_v"` (uniform
        in [0, 1]: where the digit goes between the canvas edges, see
        `affine_matrices` and `affine_transform`).
    """
    rng = np.random.default_rng(seed)
    limit = math.radians(max_rotation_degrees)
    return {
        "rotation": rng.uniform(-limit, limit, num_images),
        "shear": rng.uniform(-max_shear, max_shear, num_images),
        "scale_x": rng.uniform(*scale_range, num_images),
        "scale_y": rng.uniform(*scale_range, num_images),
        "translation_u": rng.uniform(0.0, 1.0, num_images),
        "translation_v": rng.uniform(0.0, 1.0, num_images),
    }


def affine_matrices(parameters):
    """The linear parts `rotation @ shear @ scale`, `(n, 2, 2)`.

    They act on `(x, y) = (column, row)` offsets from the image centre:

    ```
    A = [[cos t, -sin t], [sin t, cos t]] @ [[1, shear], [0, 1]]
        @ [[scale_x, 0], [0, scale_y]]
    ```
    """
    cos, sin = np.cos(parameters["rotation"]), np.sin(parameters["rotation"])
    rotation = np.stack([np.stack([cos, -sin], -1),
                         np.stack([sin, cos], -1)], -2)
    shear = np.zeros_like(rotation)
    shear[:, 0, 0] = shear[:, 1, 1] = 1.0
    shear[:, 0, 1] = parameters["shear"]
    scale = np.zeros_like(rotation)
    scale[:, 0, 0] = parameters["scale_x"]
    scale[:, 1, 1] = parameters["scale_y"]
    return rotation @ shear @ scale


def affine_transform(images, parameters, canvas_size=CANVAS_SIZE):
    """Warps each image onto a `canvas_size` canvas by inverse mapping.

    The digit's centre goes to the canvas centre moved by a translation
    that keeps the transformed bounding box of its non-zero pixels inside
    the canvas: the translation is `translation_u` (columns) and
    `translation_v` (rows) of the way between its smallest and largest
    allowed values (centred when the box does not fit). Each output pixel
    `p` reads the input at `A^-1 (p - c_out - t) + c_in`, interpolated
    bilinearly; outside the input it reads 0.

    Args:
        images: float array `(batch, height, width, channels)`.
        parameters: dict from `random_affine_parameters`.
        canvas_size: int. Defaults to `40`.

    Returns:
        float32 array `(batch, canvas_size, canvas_size, channels)`.
    """
    images = _check_images(images)
    if len(images) > _AFFINE_CHUNK:  # Bounds the sampler's memory.
        return np.concatenate([
            affine_transform(
                images[start:start + _AFFINE_CHUNK],
                {key: value[start:start + _AFFINE_CHUNK]
                 for key, value in parameters.items()}, canvas_size)
            for start in range(0, len(images), _AFFINE_CHUNK)])
    batch, height, width, channels = images.shape
    matrices = affine_matrices(parameters)  # (b, 2, 2)
    translations = _translations(images, matrices, parameters, canvas_size)
    centre_in = np.array([(width - 1) / 2.0, (height - 1) / 2.0])
    centre_out = (canvas_size - 1) / 2.0
    rows, cols = np.meshgrid(np.arange(canvas_size), np.arange(canvas_size),
                             indexing="ij")
    grid = np.stack([cols, rows], -1).reshape(-1, 2).astype("float64")
    offsets = grid[None] - centre_out - translations[:, None, :]  # (b, p, 2)
    inverse = np.linalg.inv(matrices)  # (b, 2, 2)
    source = np.einsum("bij,bpj->bpi", inverse, offsets) + centre_in
    return _bilinear(images, source).reshape(
        batch, canvas_size, canvas_size, channels)


def affine_test_set(digits, seed, canvas_size=CANVAS_SIZE):
    """The generated affNIST-style test set of `digits` (not affNIST).

    Args:
        digits: float array `(batch, 28, 28, 1)`, 0-255: e.g. the MNIST
            test digits.
        seed: int. Seeds the transforms.
        canvas_size: int. Defaults to `40`.

    Returns:
        float32 array `(batch, canvas_size, canvas_size, 1)`.
    """
    digits = _check_images(digits)
    parameters = random_affine_parameters(len(digits), seed)
    return affine_transform(digits, parameters, canvas_size)


def translated_test_set(images, max_shift, seed):
    """Each image moved by a random whole number of pixels, nothing else.

    Every image moves by its own `(rows, columns)` offset, each uniform
    over the integers in `[-max_shift, max_shift]`; what leaves the image
    is lost and what enters is 0. On the clean `mnist_canvas` test images
    (each 28 x 28 digit centred on a 40 x 40 canvas, a margin of 6) with
    `max_shift=6`, the digit's frame lands at one of the 13 x 13 positions
    that keep it whole on the canvas: the training distribution of
    Sabour et al. (2017, Section 5.2), no digit cut.

    Args:
        images: float array `(batch, height, width, channels)`.
        max_shift: int >= 0. The largest offset along each axis.
        seed: int.

    Returns:
        float32 array of the shape of `images`.

    Example:

    >>> image = np.zeros((1, 5, 5, 1)); image[0, 2, 2, 0] = 1.0
    >>> moved = translated_test_set(image, 2, seed=0)
    >>> float(moved.sum())
    1.0
    """
    images = _check_images(images)
    if (isinstance(max_shift, bool)
            or not isinstance(max_shift, numbers.Integral)
            or max_shift < 0):
        raise ValueError(
            "Received an invalid value for `max_shift`, expected an integer "
            f">= 0. Received: max_shift={max_shift!r}")
    offsets = np.random.default_rng(seed).integers(
        -max_shift, max_shift + 1, (len(images), 2))  # (batch, [row, col])
    height, width = images.shape[1:3]
    padded = np.pad(images, [(0, 0), (max_shift, max_shift),
                             (max_shift, max_shift), (0, 0)])
    result = np.empty_like(images)
    for index, (row, col) in enumerate(offsets):
        # The window whose top-left corner is at margin - offset moves
        # the content by +offset.
        top, left = max_shift - row, max_shift - col
        result[index] = padded[index, top:top + height, left:left + width]
    return result


def _translations(images, matrices, parameters, canvas_size):
    """`(batch, 2)` (x, y) translations keeping the digit on the canvas."""
    batch, height, width, _ = images.shape
    centre_in = np.array([(width - 1) / 2.0, (height - 1) / 2.0])
    centre_out = (canvas_size - 1) / 2.0
    ink = images.max(axis=-1) > 0  # (b, h, w)
    translations = np.zeros((batch, 2))
    fractions = np.stack([parameters["translation_u"],
                          parameters["translation_v"]], -1)
    for index in range(batch):
        rows = np.flatnonzero(ink[index].any(axis=1))
        cols = np.flatnonzero(ink[index].any(axis=0))
        if rows.size == 0:
            continue
        # The corners of the ink's pixel footprint, as offsets from the
        # centre, after the transform.
        corners = np.array([[c, r] for c in (cols[0] - 0.5, cols[-1] + 0.5)
                            for r in (rows[0] - 0.5, rows[-1] + 0.5)])
        moved = (corners - centre_in) @ matrices[index].T  # (4, 2)
        low = -0.5 - centre_out - moved.min(axis=0)
        high = canvas_size - 0.5 - centre_out - moved.max(axis=0)
        fits = low <= high
        translations[index] = np.where(
            fits, low + fractions[index] * (high - low), 0.0)
    return translations


def _bilinear(images, source):
    """Samples `images` at `(x, y)` points `(b, p, 2)`; 0 outside."""
    batch, height, width, channels = images.shape
    x, y = source[..., 0], source[..., 1]
    x0, y0 = np.floor(x).astype("int64"), np.floor(y).astype("int64")
    wx, wy = x - x0, y - y0
    batch_index = np.arange(batch)[:, None]
    result = np.zeros(source.shape[:2] + (channels,))
    for dy, dx, weight in ((0, 0, (1 - wx) * (1 - wy)),
                           (0, 1, wx * (1 - wy)),
                           (1, 0, (1 - wx) * wy),
                           (1, 1, wx * wy)):
        row, col = y0 + dy, x0 + dx
        inside = (row >= 0) & (row < height) & (col >= 0) & (col < width)
        values = images[batch_index, np.clip(row, 0, height - 1),
                        np.clip(col, 0, width - 1)]  # (b, p, c)
        result += np.where(inside[..., None], weight[..., None] * values, 0)
    return result.astype("float32")


def _check_images(images):
    images = np.asarray(images, dtype="float32")
    if images.ndim != 4:
        raise ValueError(
            "Expected images of shape (batch, height, width, channels). "
            f"Received: images of shape {images.shape}")
    return images
