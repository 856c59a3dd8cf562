"""Writes small affNIST test sets in the published `.mat` format, for tests.

The layout is that of Tieleman's affNIST files (see
`keras_caps.datasets.affnist`): each file a MATLAB 5 file holding a
struct `affNISTdata` with `image` (uint8 `(1600, n)`), `label_int`
(`(1, n)`), `label_one_of_n` (`(10, n)`) and the transformations
(`human_readable_transform`, `(7, n)`, zeros here).
"""

import os

import numpy as np


def affnist_columns(images):
    """The `image` field of affNIST images: `(n, 40, 40)` -> `(1600, n)`.

    Seen from MATLAB, a 40 x 40 image `M` (row `r`, column `c` is
    `M(r, c)`) is stored as the column `reshape(M', 1600, 1)`: MATLAB
    flattens column-major, so flattening the transpose lists `M` row after
    row. NumPy builds the same column with `order="F"` on the transpose.
    """
    images = np.asarray(images, dtype="uint8").reshape(-1, 40, 40)
    return np.stack([np.ravel(image.T, order="F") for image in images], -1)


def write_affnist_file(path, images, labels, compress=False):
    """Writes one affNIST `.mat` file of `images` `(n, 40, 40)` and
    integer `labels` `(n,)`; returns `path`.

    Example:

    >>> write_affnist_file(  # doctest: +SKIP
    ...     "1.mat", np.zeros((2, 40, 40), "uint8"), [3, 4])
    """
    from scipy import io as scipy_io

    labels = np.asarray(labels).astype("uint8").reshape(1, -1)
    struct = {
        "image": affnist_columns(images),
        "label_int": labels,
        "label_one_of_n": (np.arange(10)[:, None] == labels).astype(
            "uint8"),
        "human_readable_transform": np.zeros((7, labels.shape[1])),
    }
    scipy_io.savemat(path, {"affNISTdata": struct},
                     do_compression=compress)
    return path


def write_affnist_test_set(folder, images, labels, layout="batches",
                           num_batches=32, compress=False):
    """Writes an affNIST test set under `folder`; returns `folder`.

    Args:
        folder: str. Created if missing.
        images: uint8 `(n, 40, 40)`.
        labels: int `(n,)`.
        layout: `"batches"`: `folder/test_batches/1.mat` ..
            `<num_batches>.mat`, the images split in order; `"single"`:
            `folder/test.mat`.
        num_batches: int. Defaults to 32, as published.
        compress: bool. Write compressed MATLAB data elements.

    Example:

    >>> write_affnist_test_set(  # doctest: +SKIP
    ...     "affnist", np.zeros((64, 40, 40), "uint8"), np.arange(64) % 10)
    """
    os.makedirs(folder, exist_ok=True)
    if layout == "single":
        write_affnist_file(os.path.join(folder, "test.mat"), images,
                           labels, compress)
        return folder
    batches = os.path.join(folder, "test_batches")
    os.makedirs(batches, exist_ok=True)
    for index, part in enumerate(np.array_split(np.arange(len(labels)),
                                                num_batches)):
        write_affnist_file(os.path.join(batches, f"{index + 1}.mat"),
                           np.asarray(images)[part],
                           np.asarray(labels)[part], compress)
    return folder
