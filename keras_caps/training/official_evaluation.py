"""Evaluating the official Efficient-CapsNet / CapsNet weights on a test split.

Behind `keras-caps evaluate --weights <official .h5>`: builds the model of
`--model` for `--dataset`, loads the official Keras 2 HDF5 weights with
`keras_caps.applications.load_official_weights` and evaluates it on the
test split, as `evaluate` does for a saved `.keras` model.
"""

import inspect
import os

from keras_caps import datasets
from keras_caps.applications import MODELS
from keras_caps.applications import check_model_name
from keras_caps.training.hardware import describe_hardware
from keras_caps.training.model_building import check_labels_match
from keras_caps.validation import check_known_name


def evaluate_official_weights(weights, dataset, *, model="efficient_capsnet",
                              batch_size=16, data_dir=None, seed=42,
                              dataset_options=None, download=True):
    """Evaluates official HDF5 weights on the test split of `dataset`.

    The model takes raw pixels like every keras_caps model. For presets
    that standardise their input (smallNORB) it standardises them with the
    statistics of the whole training split, as the official code
    standardised its training images.

    Args:
        weights: str. Path of the official `.h5` weights file.
        dataset: str. A key of `keras_caps.datasets.DATASETS` whose preset
            the weights were trained for.
        model: str. `"efficient_capsnet"` or `"capsnet"`.
        batch_size: int. Defaults to `16`.
        data_dir: str or `None`. Raw dataset files, as for `evaluate`.
        seed: int. Defaults to `42`.
        dataset_options: dict or `None`. Loader options, e.g.
            `{"partners_per_digit": 10}`.
        download: bool. Let TFDS download a dataset that is not prepared
            (see `keras_caps.datasets.load`). Defaults to `True`.

    Returns:
        A dict with `weights`, `model`, `dataset`, `hardware` and the
        `test` metrics.
    """
    check_known_name("dataset", dataset, datasets.DATASETS)
    family = MODELS[check_model_name(model)].family
    if "weights" not in inspect.signature(family.builder).parameters:
        supported = sorted(name for name, candidate in MODELS.items()
                           if "weights" in inspect.signature(
                               candidate.family.builder).parameters)
        raise ValueError(
            f"Official weights load into {supported} only. Received: "
            f"model={model!r}")
    if not os.path.isfile(weights):
        raise ValueError(f"No official weights file at `weights`. "
                         f"Received: weights={weights!r}")
    input_statistics = None
    if family.standardizes_input(dataset):
        input_statistics = datasets.training_statistics(
            dataset, data_dir=data_dir, seed=seed, validation="test",
            download=download)
    network = family.build(dataset, input_statistics=input_statistics,
                           weights=weights)
    test = datasets.load(dataset, "test", batch_size=batch_size,
                         data_dir=data_dir, seed=seed,
                         reconstruction=family.has_decoder,
                         download=download,
                         **{**family.dataset_options(dataset),
                            **(dataset_options or {})})
    check_labels_match(network, test)
    metrics = network.evaluate(test, return_dict=True, verbose=0)
    return {"weights": os.path.abspath(weights), "model": model,
            "dataset": dataset, "hardware": describe_hardware(),
            "test": {key: float(value) for key, value in metrics.items()}}
