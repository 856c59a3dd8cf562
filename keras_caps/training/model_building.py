"""The build stage of a run: the model (in the strategy's scope) and its
splits, and the checks of batches and labels that `evaluate` shares.

`build_model_and_splits` loads the splits of a built-in dataset or of a
dataset a user brings (each split checked to yield batches), builds the
family's model for them and checks that the model can take what the
settings ask of it; nothing is written, so a refusal leaves the run
folder as it was.
"""

import keras

from keras_caps import datasets
from keras_caps import model_roles as roles
from keras_caps.applications import MODELS
from keras_caps.datasets.viewpoints import TEST_SPLITS as VIEWPOINT_TEST_SPLITS
from keras_caps.diagnostics import find_routers
from keras_caps.training.data_batches import batch_count
from keras_caps.training.data_batches import first_batch_shapes
from keras_caps.training.strategy import shard_by_data
from keras_caps.training.user_data import build_for_user_data
from keras_caps.training.user_data import training_statistics


def build_model_and_splits(settings, data, distribution, execution):
    """The model (built in the strategy's scope, compiled to run
    `steps_per_execution` steps a call) and the three splits.

    `data` is `(data_dir, user_data)`: the folder of the built-in datasets,
    and the `UserDataset` of a dataset a user brings (else `None`).
    """
    data_dir, user_data = data
    family = MODELS[settings.model].family
    if user_data is None:
        load, input_statistics = _built_in_loader(
            settings, data_dir, execution["download"],
            execution["input_workers"])
    else:
        load, input_statistics = _user_data_loader(settings, user_data)
    # Global batches; under several workers each keeps its share of every
    # batch (see `shard_by_data` for the policy).
    names = ["train", "validation", "test"]
    if settings.dataset_options.get("viewpoints") is not None:
        names += list(VIEWPOINT_TEST_SPLITS)  # smallNORB's viewpoints.
    splits = {split: shard_by_data(load(split)) for split in names}
    for split, batches in splits.items():
        check_batches(batches, split, settings.dataset, settings.batch_size,
                      settings.steps_per_epoch if split == "train"
                      else None)
    with distribution.scope():
        if user_data is None:
            network = family.build(settings.dataset,
                                   reconstruction=settings.reconstruction,
                                   input_statistics=input_statistics,
                                   **settings.builder_options())
        else:
            network = build_for_user_data(family, settings, user_data,
                                          input_statistics)
    # What `compile(steps_per_execution=...)` sets; the saved model's
    # compile config keeps the builder's (1).
    network.steps_per_execution = execution["steps_per_execution"]
    check_labels_match(network, splits["train"])
    if settings.temperature_schedule() is not None and not find_routers(
            network):
        raise ValueError(
            f"The model {settings.model!r} has no router with a routing "
            "temperature, so `routing_temperature` (`--routing-temperature`"
            ", with `--temperature-decay` and `--min-temperature`) cannot "
            "apply to it. Drop those options for this model. Received: "
            f"routing_temperature={settings.routing_temperature!r}")
    return network, splits


def _built_in_loader(settings, data_dir, download, workers=None):
    """`load(split)` of a built-in dataset (with `workers` threads in the
    NumPy pipeline, when given), and the input statistics of models that
    standardise their input (else `None`)."""
    dataset, seed = settings.dataset, settings.seed
    options = settings.dataset_options
    input_statistics = None
    if MODELS[settings.model].family.standardizes_input(dataset):
        input_statistics = datasets.training_statistics(
            dataset, data_dir=data_dir, seed=seed,
            validation=settings.validation, download=download,
            viewpoints=options.get("viewpoints"))
        options = {"statistics": input_statistics, **options}

    def load(split):
        return datasets.load(
            dataset, split, batch_size=settings.batch_size,
            data_dir=data_dir, seed=seed, validation=settings.validation,
            reconstruction=settings.reconstruction, download=download,
            workers=workers, **options)

    return load, input_statistics


def _user_data_loader(settings, user_data):
    """`load(split)` of a dataset a user brings, and the input statistics
    of models that standardise their input (else `None`)."""
    input_statistics = None
    if MODELS[settings.model].family.standardizes_input(
            settings.preset_name()):
        input_statistics = training_statistics(
            user_data, seed=settings.seed, validation=settings.validation)

    def load(split):
        return user_data.load(
            split, batch_size=settings.batch_size, seed=settings.seed,
            validation=settings.validation,
            reconstruction=settings.reconstruction,
            **settings.dataset_options)

    return load, input_statistics


def check_batches(data, split, dataset, batch_size, steps_per_epoch=None):
    """Raises when a split yields no batch, or fewer than `steps_per_epoch`.

    Returns the number of batches of one pass (`None` when unknown).
    """
    batches = batch_count(data)
    if batches is None:
        return None
    if batches == 0:
        why = ("it has fewer examples than one batch (training drops the "
               "last partial batch)" if split == "train"
               else "it has no examples")
        raise ValueError(
            f"The {split!r} split of {dataset!r} yields no batch of "
            f"batch_size={batch_size}: {why}. Use a smaller `batch_size` or "
            "more data.")
    if steps_per_epoch is not None and steps_per_epoch > batches:
        raise ValueError(
            f"`steps_per_epoch` is larger than one epoch of the {split!r} "
            f"split of {dataset!r}, which has {batches} batches of "
            f"batch_size={batch_size}. Expected at most {batches}. "
            f"Received: steps_per_epoch={steps_per_epoch}")
    return batches


def check_labels_match(network, dataset):
    """Raises when the dataset's label depth differs from the model's.

    Args:
        network: A Keras model whose first output holds the class scores.
        dataset: A `tf.data.Dataset` or `keras.utils.PyDataset` of
            `(inputs, labels)`, or of `inputs` with a `"label"` entry
            (decoder models).

    Example:

    ```python
    check_labels_match(network, datasets.load("mnist", "test"))
    ```
    """
    shapes = first_batch_shapes(dataset)
    inputs = shapes[0]
    labels = inputs[roles.LABEL] if isinstance(inputs, dict) else shapes[1]
    model_classes = keras.tree.flatten(network.output)[0].shape[-1]
    if labels[-1] != model_classes:
        raise ValueError(
            f"The dataset has {labels[-1]} classes but the model "
            f"outputs {model_classes} class scores. Received: labels of "
            f"shape {tuple(labels)}")
