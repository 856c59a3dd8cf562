"""Where the raw data comes from: local files or TFDS datasets.

`data_dir` (or, when it is `None`, the `KERAS_CAPS_DATA_DIR` environment
variable) selects local files; otherwise the data comes from TFDS, which
downloads and prepares a missing dataset on first use, as `tfds.load` does
(`download=True`, the default). Before TFDS starts, which would retry an
unreachable host for minutes, the dataset's download hosts are probed, so
that a machine without network access fails within seconds with a message
that says how to point at local files. `download=False` reads prepared
datasets only.

TFDS (and with it TensorFlow) is imported only when data comes from TFDS:
reading IDX files from a data folder needs neither.
"""

import logging
import os
import urllib.parse

import numpy as np

from keras_caps.datasets import idx

DATA_DIR_ENV = "KERAS_CAPS_DATA_DIR"

_MATERIALIZE_BATCH = 8192
# Seconds to wait for each download host to answer the connectivity probe.
_PROBE_TIMEOUT = 5.0


def resolve_data_dir(data_dir):
    """`data_dir`, else `$KERAS_CAPS_DATA_DIR`, else `None` (use TFDS)."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    return None if data_dir is None else os.fspath(data_dir)


def load_image_arrays(dataset, data_dir=None, download=True):
    """Both splits of an MNIST-format dataset as in-memory NumPy arrays.

    With a data folder (`data_dir`, else `$KERAS_CAPS_DATA_DIR`), the four
    IDX files are read from `<folder>/<dataset>/` when that subfolder
    exists, else from `<folder>` itself. Without one, the TFDS dataset of
    the same name is read (see `load_tfds`).

    Args:
        dataset: str. `"mnist"` or `"fashion_mnist"`.
        data_dir: str or `None`. The data folder.
        download: bool. Let TFDS download and prepare the dataset when it
            is not prepared yet. Defaults to `True`.

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
    import tensorflow_datasets as tfds

    from keras_caps.datasets import prepared_folders

    arrays = {}
    for split in ("train", "test"):
        ds = load_tfds(dataset, split, download=download,
                       as_supervised=True)
        images, labels = [], []
        with prepared_folders.read_errors_named(dataset, split, None,
                                                download):
            for image_batch, label_batch in tfds.as_numpy(
                    ds.batch(_MATERIALIZE_BATCH)):
                images.append(image_batch.reshape(-1, 28, 28))
                labels.append(label_batch)
        arrays[split] = (np.concatenate(images).astype("uint8"),
                         np.concatenate(labels).astype("int64"))
    return arrays


def load_tfds(name, split, data_dir=None, download=True, **kwargs):
    """`tfds.load(name, split=split, download=download)`, failing clearly.

    Files are read in their stored order (`shuffle_files=False`), so the
    example order, and with it every seeded split, is reproducible. When
    the dataset is not prepared and `download` is on, the hosts TFDS
    downloads it from are probed first (`_PROBE_TIMEOUT` seconds each):
    without network access this fails at once, where TFDS would retry for
    minutes. Prepared data is read without probing anything.

    Args:
        name: str. The TFDS dataset name.
        split: str. The TFDS split.
        data_dir: str or `None`. A TFDS data directory (holding
            `<name>/<version>/`); `None` uses the TFDS default
            (`$TFDS_DATA_DIR`, else `~/tensorflow_datasets`).
        download: bool. Download and prepare the dataset in `data_dir`
            when it is not prepared there, as `tfds.load` does. Defaults
            to `True`; `False` reads prepared datasets only.
        **kwargs: Other `tfds.load` arguments, e.g. `as_supervised`.

    Returns:
        The `tf.data.Dataset` of single examples.

    Raises:
        ValueError: if the dataset is not prepared there and cannot be
            downloaded (`download=False`, or its hosts are unreachable),
            or if its prepared folder is incomplete or damaged (no or a
            corrupt `dataset_info.json`, missing or truncated shard
            files; see `prepared_folders.check_prepared_folder`).
    """
    import tensorflow_datasets as tfds

    from keras_caps.datasets import prepared_folders

    where = data_dir or "the default TFDS data directory"
    logging.info("Loading TFDS %r split %r from %s.", name, split, where)
    prepared_folders.check_prepared_folder(name, split, data_dir, download)
    not_prepared = _not_prepared_errors()
    try:
        return _tfds_load(name, split, data_dir, False, kwargs)
    except not_prepared as error:
        if not download or isinstance(
                error, tfds.core.registered.DatasetNotFoundError):
            off = "" if download else (
                "Downloads are off (download=False, --no-download). ")
            raise ValueError(_not_prepared_message(
                name, split, data_dir, f"{off}TFDS said: {error}")) from error
    unreachable = _unreachable_download_host(name)
    if unreachable is not None:
        raise ValueError(_not_prepared_message(
            name, split, data_dir,
            f"TFDS cannot download it from this machine: {unreachable}"))
    logging.info("Downloading and preparing TFDS %r in %s.", name, where)
    try:
        return _tfds_load(name, split, data_dir, True, kwargs)
    except (*not_prepared, tfds.download.DownloadError) as error:
        raise ValueError(_not_prepared_message(
            name, split, data_dir, f"TFDS said: {error}")) from error


def check_tfds_prepared(name, data_dir=None, download=True):
    """Refuses a TFDS dataset that is not prepared when downloads are off.

    A cheap look at the prepared folder (no example is read), so that a
    command can refuse before it writes anything; `load_tfds` says the same
    if the data goes missing later. With `download=True` nothing is checked:
    the dataset is prepared on first use.

    Raises:
        ValueError: `download=False` and `name` is not prepared in
            `data_dir`, or TFDS has no dataset `name`.

    Example:

    ```python
    check_tfds_prepared("smallnorb", "/data/tfds", download=False)
    ```
    """
    if download:
        return
    import tensorflow_datasets as tfds

    try:
        prepared = tfds.builder(name, data_dir=data_dir).is_prepared()
    except _not_prepared_errors() as error:
        raise ValueError(_not_prepared_message(
            name, "train", data_dir, f"TFDS said: {error}")) from error
    if not prepared:
        raise ValueError(_not_prepared_message(
            name, "train", data_dir,
            "Downloads are off (download=False, --no-download)."))


def _not_prepared_errors():
    """What `tfds.load` raises for a dataset that is not prepared (an
    AssertionError in TFDS 4.9), or for an unknown name."""
    import tensorflow_datasets as tfds

    return (AssertionError, FileNotFoundError, OSError,
            tfds.core.registered.DatasetNotFoundError)


def _tfds_load(name, split, data_dir, download, kwargs):
    import tensorflow_datasets as tfds

    return tfds.load(name, split=split, data_dir=data_dir, download=download,
                     try_gcs=False, shuffle_files=False, **kwargs)


def _unreachable_download_host(name):
    """A description of the first download host that does not answer.

    Probes each host in the dataset's TFDS download URLs with one HEAD
    request (through the same proxies as TFDS's downloader), without
    retries. Any HTTP answer counts as reachable.

    Returns:
        str or `None` (every host answered, or TFDS lists no URLs).
    """
    import requests
    import tensorflow_datasets as tfds

    urls = sorted(tfds.builder_cls(name).url_infos or {})
    probed = set()
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        host = f"{parts.scheme}://{parts.netloc}/"
        if host in probed:
            continue
        probed.add(host)
        try:
            requests.head(host, timeout=_PROBE_TIMEOUT)
        except requests.RequestException as error:
            return f"{host} is unreachable ({type(error).__name__})."
    return None


def _not_prepared_message(name, split, data_dir, reason):
    where = data_dir or "the default TFDS data directory"
    return (
        f"The TFDS dataset {name!r} is not prepared in {where}. {reason} "
        "Either prepare it on a machine with network access (`tfds build "
        f"{name}`, or any keras_caps call there) and pass its TFDS data "
        "directory, or, for mnist and fashion_mnist, put the four raw IDX "
        "files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) in a folder "
        "and pass it as `data_dir=` (--data-dir on the command line) or set "
        f"the {DATA_DIR_ENV} environment variable. Received: name={name!r}, "
        f"split={split!r}, data_dir={data_dir!r}.")
