"""The TensorFlow-free input pipeline, and which pipeline `load` uses.

`keras_caps.datasets.load` yields a `tf.data.Dataset` (the `"tf_data"`
pipeline) or a `keras.utils.PyDataset` made with NumPy alone (the
`"numpy"` pipeline: `ImageBatches`, `MultiMnistBatches`) of the same
batches: same structure, dtypes, holdout split and distributions of the
random augmentation and pairs. `"auto"` (the default) takes the NumPy one
for the datasets it covers (mnist, fashion_mnist, multi_mnist) when the
Keras backend is not TensorFlow or TensorFlow cannot be imported, and
`tf.data` otherwise.
"""

import functools
import importlib

import keras

from keras_caps.datasets import holdout
from keras_caps.datasets import image_batches
from keras_caps.datasets import multi_mnist_batches
from keras_caps.datasets import multi_mnist_pairs
from keras_caps.datasets import numpy_augmentation
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources
from keras_caps.datasets.dataset_info import DATASETS
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

INPUT_PIPELINES = ("auto", "numpy", "tf_data")
# The datasets the NumPy pipeline covers.
NUMPY_DATASETS = tuple(name for name, info in DATASETS.items()
                       if info.numpy_pipeline)
# Those of one digit an image (`load_mnist_format`; MultiMNIST has its own).
_SINGLE_DIGIT_DATASETS = ("mnist", "fashion_mnist")
_NUM_CLASSES = 10
_AUGMENT_FUNCTIONS = {"efficient_capsnet": numpy_augmentation.augment_mnist,
                      "shift": numpy_augmentation.random_shift}
_INSTALL_TENSORFLOW = "pip install tensorflow tensorflow-datasets"


def resolve_input_pipeline(input_pipeline, dataset):
    """`"numpy"` or `"tf_data"`: the pipeline `load` builds for a dataset.

    Args:
        input_pipeline: str. `"auto"`: the NumPy pipeline for mnist,
            fashion_mnist and multi_mnist when the Keras backend is not
            TensorFlow or
            TensorFlow cannot be imported, else `tf.data`; `"numpy"` or
            `"tf_data"`: that one.
        dataset: str. A built-in dataset name.

    Returns:
        str. `"numpy"` or `"tf_data"`.

    Raises:
        ValueError: for an unknown `input_pipeline`, `"numpy"` for a
            dataset it does not cover, or a `tf.data` pipeline without
            TensorFlow (naming what to install).

    Example:

    >>> resolve_input_pipeline("numpy", "mnist")
    'numpy'
    """
    check_choice("input_pipeline", input_pipeline, INPUT_PIPELINES)
    if input_pipeline == "numpy":
        if dataset not in NUMPY_DATASETS:
            raise ValueError(
                "The NumPy input pipeline covers the datasets "
                f"{list(NUMPY_DATASETS)} only; use input_pipeline='tf_data' "
                f"(needs TensorFlow) for {dataset!r}. Received: "
                f"input_pipeline={input_pipeline!r}, dataset={dataset!r}")
        return "numpy"
    if (input_pipeline == "auto" and dataset in NUMPY_DATASETS
            and keras.backend.backend() != "tensorflow"):
        return "numpy"
    error = _tensorflow_import_error()
    if error is None:
        return "tf_data"
    if input_pipeline == "auto" and dataset in NUMPY_DATASETS:
        return "numpy"
    raise ValueError(
        f"The {dataset!r} input pipeline needs TensorFlow (tf.data and "
        f"TFDS), which cannot be imported here ({error}). Install it "
        f"(`{_INSTALL_TENSORFLOW}`), or use a dataset with a TensorFlow-"
        f"free pipeline: {list(NUMPY_DATASETS)}. Received: "
        f"dataset={dataset!r}, input_pipeline={input_pipeline!r}")


@functools.cache
def _tensorflow_import_error():
    """`None` when TensorFlow imports, else the import error's text."""
    try:
        importlib.import_module("tensorflow")
    except ImportError as error:
        return f"{type(error).__name__}: {error}"
    return None


def require_tensorflow(what, alternative=""):
    """Raises a one-line `ValueError` naming what to install, without TF.

    Args:
        what: str. What needs TensorFlow, for the message.
        alternative: str. Appended to "Install them (...)", e.g.
            `", or ..."`.

    Example:

    >>> require_tensorflow("smallnorb")  # doctest: +SKIP
    """
    error = _tensorflow_import_error()
    if error is not None:
        raise ValueError(
            f"{what} needs TensorFlow and TFDS, which cannot be imported "
            f"here ({error}). Install them (`{_INSTALL_TENSORFLOW}`)"
            f"{alternative}.")


def load_mnist_format(dataset, split, *, batch_size, training=None,
                      data_dir=None, seed=42, validation="holdout",
                      reconstruction=True, shuffle_buffer_size=None,
                      augment=True, augmentation="efficient_capsnet",
                      download=True, workers=None, use_multiprocessing=None,
                      max_queue_size=None):
    """mnist or fashion_mnist batches from the NumPy pipeline.

    The batches of `keras_caps.datasets.mnist.load` (same structure, raw
    pixel float32 images, one-hot labels, the same holdout split for the
    same seed, exactly `batch_size` examples when training and the
    remainder kept otherwise), as an `ImageBatches` (a
    `keras.utils.PyDataset`) made with NumPy: the training order is a full
    permutation, new every epoch, and the augmentation is
    `keras_caps.datasets.numpy_augmentation` (the same distributions as the
    `tf.data` version; not the same draws, as the random generators
    differ).

    Data: the four IDX files from `data_dir` (or `$KERAS_CAPS_DATA_DIR`),
    read without TensorFlow; otherwise from TFDS, which needs TensorFlow.

    Args:
        dataset: str. `"mnist"` or `"fashion_mnist"`.
        split, batch_size, training, data_dir, seed, validation,
        reconstruction, augment, augmentation, download: As in
            `keras_caps.datasets.mnist.load`.
        shuffle_buffer_size: int or `None`. `None` or at least the split
            size (a full shuffle, the `tf.data` default); smaller buffers
            exist in the `tf.data` pipeline only.
        workers, use_multiprocessing, max_queue_size: `None` (Keras'
            defaults: 1, `False`, 10) or as in `keras.utils.PyDataset`.

    Returns:
        An `ImageBatches`.

    Example:

    >>> batches = load_mnist_format(  # doctest: +SKIP
    ...     "mnist", "train", batch_size=16, data_dir="/data/mnist")
    >>> batches[0][0]["image"].shape  # doctest: +SKIP
    (16, 28, 28, 1)
    """
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    check_choice("dataset", dataset, _SINGLE_DIGIT_DATASETS)
    check_choice("augmentation", augmentation,
                 DATASETS[dataset].augmentations)
    arrays = _image_arrays(dataset, data_dir, download)
    images, labels = holdout.select_split(arrays, split, validation, seed)
    if (training and shuffle_buffer_size is not None
            and shuffle_buffer_size < len(labels)):
        raise ValueError(
            "The NumPy input pipeline shuffles the whole split; a smaller "
            "`shuffle_buffer_size` needs input_pipeline='tf_data'. "
            f"Received: shuffle_buffer_size={shuffle_buffer_size} for "
            f"{len(labels)} examples")
    queue = _queue_options(workers, use_multiprocessing, max_queue_size)
    return image_batches.ImageBatches(
        images, labels, batch_size=batch_size, num_classes=_NUM_CLASSES,
        training=training, seed=seed, reconstruction=reconstruction,
        augment=_AUGMENT_FUNCTIONS[augmentation] if augment else None,
        **queue)


def _image_arrays(dataset, data_dir, download):
    """`sources.load_image_arrays`, failing clearly without TensorFlow."""
    if sources.resolve_data_dir(data_dir) is None:
        require_tensorflow(
            f"Reading {dataset!r} without a data folder (from TFDS)",
            ", or point `data_dir` (--data-dir, $KERAS_CAPS_DATA_DIR) at a "
            "folder holding its four IDX files")
    return sources.load_image_arrays(dataset, data_dir, download)


def load_multi_mnist(split, *, batch_size, training=None, data_dir=None,
                     seed=42, validation="holdout", reconstruction=True,
                     shuffle_buffer_size=None, shift=6,
                     partners_per_digit=1000, pairs_per_epoch=None,
                     download=True, workers=None, use_multiprocessing=None,
                     max_queue_size=None):
    """MultiMNIST batches from the NumPy pipeline (`MultiMnistBatches`).

    The batches of `keras_caps.datasets.multi_mnist.load` (same structure,
    digit pools, pair counts and distributions), made with NumPy; the
    random pairs come from NumPy's generators, so they are not the
    `tf.data` pipeline's pairs.

    Args:
        split, batch_size, training, data_dir, seed, validation,
        reconstruction, shuffle_buffer_size, shift, partners_per_digit,
        pairs_per_epoch, download: As in
            `keras_caps.datasets.multi_mnist.load`.
        workers, use_multiprocessing, max_queue_size: `None` (Keras'
            defaults) or as in `keras.utils.PyDataset`.

    Returns:
        A `MultiMnistBatches`.

    Example:

    >>> batches = load_multi_mnist(  # doctest: +SKIP
    ...     "test", batch_size=100, partners_per_digit=10,
    ...     data_dir="/data/mnist")
    >>> batches[0][0]["image"].shape  # doctest: +SKIP
    (100, 36, 36, 1)
    """
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    multi_mnist_pairs.check_options(shift, partners_per_digit,
                                    pairs_per_epoch)
    arrays = _image_arrays("mnist", data_dir, download)
    images, labels = holdout.select_split(arrays, split, validation, seed)
    plan = multi_mnist_pairs.plan_split(
        split, training=training, pool=multi_mnist_pairs.DigitPool(labels),
        batch_size=batch_size, partners_per_digit=partners_per_digit,
        pairs_per_epoch=pairs_per_epoch)
    return multi_mnist_batches.MultiMnistBatches(
        images, labels, batch_size=batch_size, training=plan.training,
        seed=seed, shift=shift, num_batches=plan.num_batches,
        partners=plan.partners, salt=plan.salt,
        reconstruction=reconstruction,
        **_queue_options(workers, use_multiprocessing, max_queue_size))


def _queue_options(workers, use_multiprocessing, max_queue_size):
    """The `PyDataset` options given (not `None`), checked."""
    options = {}
    for name, value in (("workers", workers),
                        ("max_queue_size", max_queue_size)):
        if value is not None:
            check_positive_int(name, value)
            options[name] = value
    if use_multiprocessing is not None:
        check_bool("use_multiprocessing", use_multiprocessing)
        options["use_multiprocessing"] = use_multiprocessing
    return options
