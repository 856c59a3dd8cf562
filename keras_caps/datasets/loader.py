"""`keras_caps.datasets.load`: one entry point for every dataset."""

import inspect

from keras_caps.datasets import cifar
from keras_caps.datasets import fashion_mnist
from keras_caps.datasets import mnist
from keras_caps.datasets import mnist_canvas
from keras_caps.datasets import multi_mnist
from keras_caps.datasets import smallnorb
from keras_caps.datasets import viewpoints as viewpoints_lib
from keras_caps.validation import check_bool

_LOADERS = {
    "mnist": mnist.load,
    "mnist_canvas": mnist_canvas.load,
    "fashion_mnist": fashion_mnist.load,
    "smallnorb": smallnorb.load,
    "multi_mnist": multi_mnist.load,
    "cifar10": cifar.load_cifar10,
    "cifar100": cifar.load_cifar100,
}
# Datasets whose presets may standardise the input, with the function that
# computes the training images' per-channel statistics.
_TRAINING_STATISTICS = {
    "smallnorb": smallnorb.training_statistics,
}
_COMMON_ARGUMENTS = ("split", "batch_size", "training", "data_dir", "seed",
                     "validation", "reconstruction", "shuffle_buffer_size",
                     "download")


def load(dataset, split, *, batch_size, training=None, data_dir=None,
         seed=42, validation="holdout", reconstruction=True,
         shuffle_buffer_size=None, download=True, **options):
    """Batches of a dataset, ready for `model.fit`, in the official recipe.

    Dispatches to `keras_caps.datasets.<dataset>.load`, whose docstring says
    exactly what is yielded. In short, with `reconstruction=True`:
    `({"image": image, "label": label},
      {"length": label, "reconstruction": target})`, else `(image, label)`;
    images float32 in **raw pixel units** ([0, 255]; the models scale
    them), labels one-hot float32 of depth `DATASETS[dataset].num_classes`,
    targets the (augmented) image / 255. MultiMNIST yields label pairs
    `(batch, 2, 10)` as the input, a multi-hot `(batch, 10)` as the length
    target and both shifted digits `(batch, 2, 36, 36, 1)` as the
    reconstruction target.

    Splits: `validation="holdout"` (default) trains on the
    training split minus a seeded, class-stratified 10 % holdout and
    validates on the holdout; `validation="test"` (the official protocol)
    trains on the whole training split and validates on the test split.
    `"test"` is always the test split.

    Batches hold exactly `batch_size` (the global batch size) examples when
    training (the remainder is dropped); training shuffles (reshuffled every
    epoch) and augments. Everything is a function of `seed`.

    Data comes from `data_dir` (or `$KERAS_CAPS_DATA_DIR`): the four IDX
    files for mnist, fashion_mnist and multi_mnist, a TFDS data directory
    for smallnorb, cifar10 and cifar100. Otherwise from TFDS, which, as
    `tfds.load` does, downloads and prepares a dataset on first use into
    its data directory (`$TFDS_DATA_DIR`, else `~/tensorflow_datasets`);
    `download=False` reads prepared datasets only. Data that is missing and
    cannot be downloaded (no network access: the download hosts are probed
    first, for a few seconds) fails at once, saying how to point at local
    files.

    Args:
        dataset: str. One of `"mnist"`, `"fashion_mnist"`, `"smallnorb"`,
            `"multi_mnist"`, `"cifar10"`, `"cifar100"`.
        split: str. `"train"`, `"validation"` or `"test"`.
        batch_size: int. The global batch size.
        training: bool or `None`. Shuffle and augment. Defaults to
            `split == "train"`.
        data_dir: str or `None`. Local data folder.
        seed: int. Defaults to `42`.
        validation: str. `"holdout"` or `"test"`. Defaults to `"holdout"`.
        reconstruction: bool. Yield reconstruction targets. Defaults to
            `True`.
        shuffle_buffer_size: int or `None`. Defaults to the split size.
        download: bool. Let TFDS download a dataset that is not prepared.
            Defaults to `True`.
        **options: Dataset-specific options: `augment` (mnist,
            fashion_mnist, smallnorb, cifar10, cifar100), `augmentation`
            (mnist, fashion_mnist), `statistics` (smallnorb), `viewpoints`
            (smallnorb: `"azimuth"` or `"elevation"`, the novel-viewpoint
            splits of Hinton et al. 2018, §5.1, see
            `keras_caps.datasets.smallnorb.load`), `shift`,
            `partners_per_digit` and `pairs_per_epoch` (multi_mnist).

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> train = keras_caps.datasets.load(  # doctest: +SKIP
    ...     "mnist", "train", batch_size=16)
    >>> val = keras_caps.datasets.load(  # doctest: +SKIP
    ...     "mnist", "validation", batch_size=16)
    >>> model.fit(train, validation_data=val, epochs=150)  # doctest: +SKIP
    """
    if dataset not in _LOADERS:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(_LOADERS)}. "
            f"Received: dataset={dataset!r}")
    if "viewpoints" in options:
        viewpoints_lib.check_viewpoints(dataset, options["viewpoints"])
    loader = _LOADERS[dataset]
    accepted = sorted(name for name in inspect.signature(loader).parameters
                      if name not in _COMMON_ARGUMENTS)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"Unknown options for dataset {dataset!r}: {unknown}. Expected "
            f"some of {accepted}. Received: options={options!r}")
    check_bool("download", download)
    return loader(split, batch_size=batch_size, training=training,
                  data_dir=data_dir, seed=seed, validation=validation,
                  reconstruction=reconstruction,
                  shuffle_buffer_size=shuffle_buffer_size,
                  download=download, **options)


def training_statistics(dataset, *, data_dir=None, seed=42,
                        validation="holdout", download=True,
                        viewpoints=None):
    """Per-channel `(mean, variance)` of the images a model trains on.

    For models that standardise their input (`input_scaling` of
    `"standardize"` in their preset): computed over the training split
    minus the holdout (`validation="holdout"`) or the whole training split
    (`"test"`), in raw pixel units, as `keras_caps.datasets.smallnorb.
    training_statistics` documents; with `viewpoints` (smallnorb), over
    the training images of the familiar viewpoints only.

    Raises:
        ValueError: for a dataset without such statistics.
    """
    if dataset not in _TRAINING_STATISTICS:
        raise ValueError(
            "Only some datasets provide input statistics for "
            f"standardisation. Expected one of {sorted(_TRAINING_STATISTICS)}"
            f". Received: dataset={dataset!r}")
    check_bool("download", download)
    viewpoints_lib.check_viewpoints(dataset, viewpoints)
    extra = {} if viewpoints is None else {"viewpoints": viewpoints}
    return _TRAINING_STATISTICS[dataset](data_dir=data_dir, seed=seed,
                                         validation=validation,
                                         download=download, **extra)
