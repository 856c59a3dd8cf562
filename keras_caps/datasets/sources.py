"""Where the raw data comes from: local files or prepared TFDS datasets.

`data_dir` (or, when it is `None`, the `KERAS_CAPS_DATA_DIR` environment
variable) selects local files; otherwise the data comes from TFDS with
`download=False`, and a missing dataset fails at once with a message that
says how to point at local files.
"""

import logging
import os

import numpy as np
import tensorflow_datasets as tfds

from keras_caps.datasets import idx

DATA_DIR_ENV = "KERAS_CAPS_DATA_DIR"

_MATERIALIZE_BATCH = 8192


def resolve_data_dir(data_dir):
    """`data_dir`, else `$KERAS_CAPS_DATA_DIR`, else `None` (use TFDS)."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    return None if data_dir is None else os.fspath(data_dir)


def load_image_arrays(dataset, data_dir=None):
    """Both splits of an MNIST-format dataset as in-memory NumPy arrays.

    With a data folder (`data_dir`, else `$KERAS_CAPS_DATA_DIR`), the four
    IDX files are read from `<folder>/<dataset>/` when that subfolder
    exists, else from `<folder>` itself. Without one, the prepared TFDS
    dataset of the same name is read with `download=False`.

    Args:
        dataset: str. `"mnist"` or `"fashion_mnist"`.
        data_dir: str or `None`. The data folder.

    Returns:
        dict `{"train": (images, labels), "test": (images, labels)}`,
        images uint8 of shape `(num_examples, 28, 28)`, labels int64 of
        shape `(num_examples,)`.
    """
    folder = resolve_data_dir(data_dir)
    if folder is not None:
        subfolder = os.path.join(folder, dataset)
        if os.path.isdir(subfolder):
            return idx.read_idx_dataset(subfolder)
        try:
            return idx.read_idx_dataset(folder)
        except ValueError as error:
            if not str(error).startswith("Missing IDX file"):
                raise
            raise ValueError(
                f"{error}. No {dataset!r} subfolder there either: "
                f"{subfolder!r}.") from error
    arrays = {}
    for split in ("train", "test"):
        ds = load_tfds(dataset, split, as_supervised=True)
        images, labels = [], []
        for image_batch, label_batch in tfds.as_numpy(
                ds.batch(_MATERIALIZE_BATCH)):
            images.append(image_batch.reshape(-1, 28, 28))
            labels.append(label_batch)
        arrays[split] = (np.concatenate(images).astype("uint8"),
                         np.concatenate(labels).astype("int64"))
    return arrays


def load_tfds(name, split, data_dir=None, **kwargs):
    """`tfds.load(name, split=split, download=False)`, failing clearly.

    Files are read in their stored order (`shuffle_files=False`), so the
    example order, and with it every seeded split, is reproducible.

    Args:
        name: str. The TFDS dataset name.
        split: str. The TFDS split.
        data_dir: str or `None`. A TFDS data directory (holding
            `<name>/<version>/`); `None` uses the TFDS default.
        **kwargs: Other `tfds.load` arguments, e.g. `as_supervised`.

    Returns:
        The `tf.data.Dataset` of single examples.

    Raises:
        ValueError: if the dataset is not prepared there. Nothing is
            downloaded.
    """
    logging.info("Loading TFDS %r split %r from %s.", name, split,
                 data_dir or "the default TFDS data directory")
    try:
        return tfds.load(name, split=split, data_dir=data_dir,
                         download=False, try_gcs=False, shuffle_files=False,
                         **kwargs)
    except (AssertionError, FileNotFoundError, OSError,
            tfds.core.registered.DatasetNotFoundError) as error:
        where = data_dir or "the default TFDS data directory"
        raise ValueError(
            f"The TFDS dataset {name!r} is not prepared in {where}, and "
            "keras_caps never downloads. Either prepare it on a machine "
            f"with network access (`tfds build {name}`) and pass its data "
            "directory, or, for mnist and fashion_mnist, put the four raw "
            "IDX files (train-images-idx3-ubyte.gz, "
            "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
            "t10k-labels-idx1-ubyte.gz) in a folder and pass it as "
            "`data_dir=` (--data-dir on the command line) or set the "
            f"{DATA_DIR_ENV} environment variable. Received: name={name!r}, "
            f"split={split!r}, data_dir={data_dir!r}. TFDS said: "
            f"{error}") from error
