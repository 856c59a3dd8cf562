"""`keras_caps.datasets.load`: one entry point for every dataset.

The `tf.data` loaders are imported when used (they import TensorFlow), so
this module, and the NumPy pipeline it picks on JAX and PyTorch, work
without TensorFlow.
"""

import functools
import inspect

from keras_caps.datasets import numpy_pipeline
from keras_caps.datasets import viewpoints as viewpoints_lib
from keras_caps.datasets.dataset_info import DATASETS
from keras_caps.validation import check_bool

# Datasets whose presets may standardise the input (their training images'
# per-channel statistics are computed by `training_statistics`).
_STANDARDIZED = ("smallnorb",)
# The `keras.utils.PyDataset` options of the NumPy pipeline.
_QUEUE_ARGUMENTS = ("workers", "use_multiprocessing", "max_queue_size")


def _tf_data_loader(dataset):
    """The `tf.data` loader of `dataset` (its module imports TensorFlow,
    so it is imported here, when a `tf.data` pipeline is asked for)."""
    from keras_caps.datasets import cifar
    from keras_caps.datasets import fashion_mnist
    from keras_caps.datasets import mnist
    from keras_caps.datasets import mnist_canvas
    from keras_caps.datasets import multi_mnist
    from keras_caps.datasets import smallnorb

    return {"mnist": mnist.load, "mnist_canvas": mnist_canvas.load,
            "fashion_mnist": fashion_mnist.load, "smallnorb": smallnorb.load,
            "multi_mnist": multi_mnist.load, "cifar10": cifar.load_cifar10,
            "cifar100": cifar.load_cifar100}[dataset]


def _loader(dataset, input_pipeline):
    if input_pipeline == "numpy" and dataset == "multi_mnist":
        return numpy_pipeline.load_multi_mnist
    if input_pipeline == "numpy":
        return functools.partial(numpy_pipeline.load_mnist_format, dataset)
    return _tf_data_loader(dataset)


_COMMON_ARGUMENTS = ("split", "batch_size", "training", "data_dir", "seed",
                     "validation", "reconstruction", "shuffle_buffer_size",
                     "download")


def load(dataset, split, *, batch_size, training=None, data_dir=None,
         seed=42, validation="holdout", reconstruction=True,
         shuffle_buffer_size=None, download=True, input_pipeline="auto",
         workers=None, use_multiprocessing=None, max_queue_size=None,
         **options):
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

    Two input pipelines yield these batches: `tf.data` (a
    `tf.data.Dataset`) and, for mnist, fashion_mnist and multi_mnist, a
    TensorFlow-free one (a `keras.utils.PyDataset` made with NumPy, see
    `keras_caps.datasets.numpy_pipeline`), with the same structure, holdout
    split and augmentation distributions; the training order and the
    augmentation draws come from different random generators. By default
    (`input_pipeline="auto"`) these three use the NumPy one
    when the Keras backend is not TensorFlow or TensorFlow cannot be
    imported (there, IDX files in a data folder are needed, as TFDS needs
    TensorFlow); the other datasets need TensorFlow on every backend.

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
        input_pipeline: str. `"auto"`, `"numpy"` (mnist, fashion_mnist,
            multi_mnist) or `"tf_data"`. Defaults to `"auto"`.
        workers, use_multiprocessing, max_queue_size: `None` (Keras'
            defaults) or the `keras.utils.PyDataset` options of the NumPy
            pipeline: threads (or processes) making batches ahead.
        **options: Dataset-specific options: `augment` (mnist,
            fashion_mnist, smallnorb, cifar10, cifar100), `augmentation`
            (mnist, fashion_mnist), `statistics` (smallnorb), `viewpoints`
            (smallnorb: `"azimuth"` or `"elevation"`, the novel-viewpoint
            splits of Hinton et al. 2018, §5.1, see
            `keras_caps.datasets.smallnorb.load`), `shift`,
            `partners_per_digit` and `pairs_per_epoch` (multi_mnist).

    Returns:
        A `tf.data.Dataset` with known cardinality, or, from the NumPy
        pipeline, a `keras.utils.PyDataset` of known length.

    Example:

    >>> train = keras_caps.datasets.load(  # doctest: +SKIP
    ...     "mnist", "train", batch_size=16)
    >>> val = keras_caps.datasets.load(  # doctest: +SKIP
    ...     "mnist", "validation", batch_size=16)
    >>> model.fit(train, validation_data=val, epochs=150)  # doctest: +SKIP
    """
    if dataset not in DATASETS:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(DATASETS)}. "
            f"Received: dataset={dataset!r}")
    if "viewpoints" in options:
        viewpoints_lib.check_viewpoints(dataset, options["viewpoints"])
    input_pipeline = numpy_pipeline.resolve_input_pipeline(input_pipeline,
                                                           dataset)
    queue = {"workers": workers, "use_multiprocessing": use_multiprocessing,
             "max_queue_size": max_queue_size}
    given = sorted(name for name, value in queue.items() if value is not None)
    if input_pipeline == "tf_data" and given:
        raise ValueError(
            f"{given} are options of the NumPy input pipeline "
            f"(input_pipeline='numpy', {list(numpy_pipeline.NUMPY_DATASETS)}"
            "); tf.data "
            f"sets its own parallelism. Received: dataset={dataset!r}, "
            f"{', '.join(f'{name}={queue[name]!r}' for name in given)}")
    loader = _loader(dataset, input_pipeline)
    accepted = sorted(name for name in inspect.signature(loader).parameters
                      if name not in _COMMON_ARGUMENTS + _QUEUE_ARGUMENTS)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"Unknown options for dataset {dataset!r}: {unknown}. Expected "
            f"some of {accepted}. Received: options={options!r}")
    check_bool("download", download)
    if input_pipeline == "numpy":
        options = {**options, **queue}
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
    if dataset not in _STANDARDIZED:
        raise ValueError(
            "Only some datasets provide input statistics for "
            f"standardisation. Expected one of {sorted(_STANDARDIZED)}"
            f". Received: dataset={dataset!r}")
    check_bool("download", download)
    viewpoints_lib.check_viewpoints(dataset, viewpoints)
    numpy_pipeline.require_tensorflow(
        f"Computing the {dataset!r} input statistics")
    from keras_caps.datasets import smallnorb

    extra = {} if viewpoints is None else {"viewpoints": viewpoints}
    return smallnorb.training_statistics(
        data_dir=data_dir, seed=seed, validation=validation,
        download=download, **extra)
