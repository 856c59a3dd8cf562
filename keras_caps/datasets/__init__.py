"""Input pipelines of the capsule-network benchmarks (`tf.data` or NumPy).

`load(dataset, split, ...)` returns batches for `model.fit`; `DATASETS`
describes each dataset. Images are yielded as raw pixels (float32, 0-255
scale); models scale them themselves.

TensorFlow is imported only when a `tf.data` pipeline is used: `DATASETS`,
`load` and the NumPy-only modules (`idx`, the IDX reader, `holdout`, the
validation split, `numpy_augmentation`, `image_batches` and
`multi_mnist_batches`, the TensorFlow-free pipeline of mnist,
fashion_mnist and multi_mnist) work on machines without TensorFlow, e.g.
with the JAX backend.
"""

import importlib

from keras_caps.datasets.dataset_info import DATASETS
from keras_caps.datasets.dataset_info import DatasetInfo

_SUBMODULES = ("affnist",
               "augmentation", "cifar", "crops", "fashion_mnist", "holdout",
               "idx", "image_arrays", "image_folder", "image_memory",
               "image_shifts", "mnist", "mnist_canvas", "multi_mnist",
               "npz_arrays", "pipeline", "smallnorb", "sources",
               "tfds_images", "tfds_splits", "user_dataset", "viewpoints",
               "augmentation_parameters", "image_batches",
               "multi_mnist_batches", "numpy_augmentation",
               "numpy_pipeline")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"keras_caps.datasets.{name}")
    if name in ("load", "training_statistics"):
        from keras_caps.datasets import loader

        return getattr(loader, name)
    raise AttributeError(
        f"module 'keras_caps.datasets' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES)
                  + ["load", "training_statistics"])
