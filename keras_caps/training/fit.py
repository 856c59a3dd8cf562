"""The training recipe behind `keras-caps train` and `keras-caps evaluate`.

One run writes, under its output folder:

- `backup/`: `BackupAndRestore` state while training (deleted at the end);
  running the same command again after a crash resumes from it;
- `checkpoints/best.keras` (+ `.json`): the best model on the validation
  metric, written atomically;
- `history.csv` and `logs/` (TensorBoard);
- `model.keras`: the selected (best-on-validation) model;
- `export/`: the SavedModel of the inference graph, raw images in;
- `metrics.json`: test metrics labelled with protocol, hardware, precision
  and epochs.
"""

import json
import logging
import os
import platform
import shutil
import time

import keras
import tensorflow as tf

from keras_caps import datasets
from keras_caps.export import check_export_target
from keras_caps.export import export_inference_model
from keras_caps.training.atomic_files import save_model_atomically
from keras_caps.training.atomic_files import write_json_atomically
from keras_caps.training.best_checkpoint import BestCheckpoint
from keras_caps.training.model_recipe import MODELS
from keras_caps.training.strategy import get_strategy
from keras_caps.training.strategy import is_chief
from keras_caps.training.strategy import shard_by_data
from keras_caps.training.strategy import task_name

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PROTOCOLS = {
    "holdout": "holdout (model selected on 10% of the training data)",
    "test": "test-as-validation (official)",
}


def train(model="efficient_capsnet", dataset="mnist", *, output_dir,
          epochs=None, batch_size=None, precision="float32", strategy="auto",
          data_dir=None, seed=42, validation="holdout", reconstruction=None,
          deterministic=False, steps_per_epoch=None, backup_frequency=500,
          verbose="auto", dataset_options=None, download=True):
    """Trains, selects on validation, tests, saves and exports one model.

    Args:
        model: str. A key of `MODELS`.
        dataset: str. A key of `keras_caps.datasets.DATASETS`.
        output_dir: str. Folder for checkpoints, logs, model and export.
        epochs: int. Defaults to the model preset's (150 for
            EfficientCapsNet).
        batch_size: int. The global batch size. Defaults to the model
            preset's (16 for EfficientCapsNet).
        precision: str. `"float32"`, `"mixed_float16"` or `"mixed_bfloat16"`.
        strategy: str. See `keras_caps.training.strategy.get_strategy`.
        data_dir: str. Folder with the raw dataset files; `None` uses
            `KERAS_CAPS_DATA_DIR` or TFDS.
        seed: int. Seeds weights, shuffling, augmentation and splits.
        validation: str. `"holdout"` (select on held-out training data) or
            `"test"` (the official protocol).
        reconstruction: bool. Train with the decoder. Defaults to `None`:
            with the decoder when the model has one.
        deterministic: bool. Enable TensorFlow op determinism.
        steps_per_epoch: int. Limit the steps of each epoch (short runs).
        backup_frequency: int. Steps between crash-recovery backups.
        verbose: Keras `fit` verbosity.
        dataset_options: dict of extra loader options (e.g. MultiMNIST's
            `partners_per_digit`), on top of (and overriding) the model
            recipe's own (e.g. CapsNet's shift augmentation).
        download: bool. Let TFDS download a dataset that is not prepared
            (see `keras_caps.datasets.load`). Defaults to `True`.

    Returns:
        The metrics record written to `metrics.json`.
    """
    family = _check_choice("model", model, MODELS)
    _check_choice("dataset", dataset, datasets.DATASETS)
    _check_choice("precision", precision, PRECISIONS)
    _check_choice("validation", validation, PROTOCOLS)
    preset = family.get_preset(dataset)
    reconstruction = family.resolve_reconstruction(reconstruction)
    # Fails now rather than after training if `export/` holds anything but
    # an export of keras_caps (which a rerun replaces).
    check_export_target(os.path.join(output_dir, "export"), overwrite=True,
                        model_path=os.path.join(output_dir, "model.keras"))
    dataset_options = {**family.dataset_options(dataset),
                       **(dataset_options or {})}
    # The run's settings, as `metrics.json` records them; the dataset
    # options are what `evaluate` needs to rebuild the same test set (input
    # statistics, added later, are stored in the model itself).
    settings = {
        "model": model, "dataset": dataset,
        "protocol": PROTOCOLS[validation],
        "epochs": preset["epochs"] if epochs is None else epochs,
        "steps_per_epoch": steps_per_epoch,
        "batch_size": (preset["batch_size"] if batch_size is None
                       else batch_size),
        "precision": precision, "seed": seed,
        "dataset_options": dict(dataset_options),
    }
    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    previous_policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        distribution = get_strategy(strategy)
        network, splits = _build(family, settings, reconstruction,
                                 dataset_options, data_dir, validation,
                                 distribution, download)
        # Only the chief writes the run's files. Other workers keep their
        # own backup (so that a restarted cluster resumes every worker from
        # the same step), checkpoint and logs in a scratch folder of their
        # own, removed when training ends.
        chief = is_chief(distribution)
        work_dir = output_dir if chief else os.path.join(
            output_dir, f".{task_name(distribution)}")
        record = {**settings, **_fit_select_and_test(
            network, splits, family, settings, work_dir, backup_frequency,
            verbose)}
        record.update(
            strategy=type(distribution).__name__,
            num_replicas=distribution.num_replicas_in_sync,
            hardware=describe_hardware(),
            versions={"keras": keras.__version__,
                      "tensorflow": tf.__version__})
        if chief:
            _write_outputs(network, output_dir, reconstruction, record)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
        logging.info("Test metrics: %s", json.dumps(record["test"]))
        return record
    finally:
        keras.config.set_dtype_policy(previous_policy)


def _build(family, settings, reconstruction, dataset_options, data_dir,
           validation, distribution, download):
    """The model (built in the strategy's scope) and the three splits."""
    dataset, seed = settings["dataset"], settings["seed"]
    input_statistics = None
    if family.standardizes_input(dataset):
        input_statistics = datasets.training_statistics(
            dataset, data_dir=data_dir, seed=seed, validation=validation,
            download=download)
        dataset_options = {"statistics": input_statistics,
                           **dataset_options}
    # Global batches; under several workers each keeps its share of every
    # batch (see `shard_by_data` for the policy).
    splits = {
        split: shard_by_data(datasets.load(
            dataset, split, batch_size=settings["batch_size"],
            data_dir=data_dir, seed=seed, validation=validation,
            reconstruction=reconstruction, download=download,
            **dataset_options))
        for split in ("train", "validation", "test")
    }
    with distribution.scope():
        network = family.build(dataset, reconstruction=reconstruction,
                               input_statistics=input_statistics)
    _check_labels_match(network, splits["train"])
    return network, splits


def _fit_select_and_test(network, splits, family, settings, work_dir,
                         backup_frequency, verbose):
    """Trains, reloads the best weights on validation, tests them.

    Returns the record's entries about selection, time and test metrics.
    """
    os.makedirs(work_dir, exist_ok=True)
    checkpoint = BestCheckpoint(
        os.path.join(work_dir, "checkpoints", "best.keras"))
    callbacks = _callbacks(
        work_dir, checkpoint, backup_frequency,
        family.learning_rate_schedule(settings["dataset"]))
    start = time.time()
    network.fit(splits["train"], validation_data=splits["validation"],
                epochs=settings["epochs"],
                steps_per_epoch=settings["steps_per_epoch"],
                callbacks=callbacks, verbose=verbose,
                shuffle=False)  # The pipeline shuffles each epoch.
    train_seconds = time.time() - start
    if os.path.exists(checkpoint.path):
        network.load_weights(checkpoint.path)  # The selected model.
    test_metrics = network.evaluate(splits["test"], return_dict=True,
                                    verbose=0)
    return {
        "selected_epoch": (None if checkpoint.best_epoch is None
                           else checkpoint.best_epoch + 1),
        "monitor": checkpoint.monitor,
        "best_validation": checkpoint.best,
        "train_seconds_this_run": round(train_seconds, 1),
        "test": {key: float(value) for key, value in test_metrics.items()},
    }


def _write_outputs(network, output_dir, reconstruction, record):
    """The chief's `model.keras`, `export/` and `metrics.json`."""
    model_path = os.path.join(output_dir, "model.keras")
    save_model_atomically(network, model_path)
    # A rerun replaces the export of an earlier run (only an export of
    # keras_caps: anything else at `export/` is refused, never deleted).
    export_inference_model(network, os.path.join(output_dir, "export"),
                           reconstruction=reconstruction, overwrite=True,
                           model_path=model_path)
    write_json_atomically(os.path.join(output_dir, "metrics.json"), record)


def _callbacks(work_dir, checkpoint, backup_frequency, schedule):
    # The scheduler comes first: it adds each epoch's `learning_rate` to
    # the logs that the CSV and TensorBoard logs then write.
    callbacks = [] if schedule is None else [
        keras.callbacks.LearningRateScheduler(schedule)]
    return callbacks + [
        keras.callbacks.BackupAndRestore(
            os.path.join(work_dir, "backup"), save_freq=backup_frequency,
            double_checkpoint=True),
        checkpoint,
        keras.callbacks.CSVLogger(os.path.join(work_dir, "history.csv"),
                                  append=True),
        keras.callbacks.TensorBoard(os.path.join(work_dir, "logs")),
    ]


def evaluate(model_path, dataset, *, batch_size=16, data_dir=None, seed=42,
             dataset_options=None, download=True):
    """Evaluates a saved `.keras` model on the test split of `dataset`.

    When the model comes from `train` (a `metrics.json` beside it), the
    test set is built with the loader options that run used (e.g.
    CapsNet's 4-pixel MultiMNIST shifts); `dataset_options` override them.
    `download=False` reads prepared TFDS datasets only (see
    `keras_caps.datasets.load`).
    """
    _check_choice("dataset", dataset, datasets.DATASETS)
    if not os.path.exists(model_path):
        raise ValueError(f"No model at `model_path`. Received: "
                         f"model_path={model_path!r}")
    network = keras.saving.load_model(model_path)
    names = {layer.name for layer in network.layers}
    run_record = os.path.join(os.path.dirname(os.path.abspath(model_path)),
                              "metrics.json")
    options = {}
    if os.path.exists(run_record):
        with open(run_record) as file:
            record = json.load(file)
        if record.get("dataset") == dataset:
            options.update(record.get("dataset_options", {}))
    options.update(dataset_options or {})
    test = datasets.load(dataset, "test", batch_size=batch_size,
                         data_dir=data_dir, seed=seed,
                         reconstruction="label" in names,
                         download=download, **options)
    _check_labels_match(network, test)
    metrics = network.evaluate(test, return_dict=True, verbose=0)
    return {"model_path": os.path.abspath(model_path), "dataset": dataset,
            "hardware": describe_hardware(),
            "test": {key: float(value) for key, value in metrics.items()}}


def describe_hardware():
    """A short description of the devices TensorFlow trains on."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = [tf.config.experimental.get_device_details(gpu).get(
            "device_name", gpu.name) for gpu in gpus]
        return f"{len(gpus)} GPU(s): {', '.join(names)}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"CPU: {cpu}, {os.cpu_count()} cores"


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"Unknown `{name}`. Expected one of {sorted(choices)}. "
            f"Received: {name}={value!r}")
    return choices[value] if isinstance(choices, dict) else value


def _check_labels_match(network, dataset):
    """Raises when the dataset's label depth differs from the model's."""
    spec = dataset.element_spec
    inputs = spec[0]
    labels = inputs["label"] if isinstance(inputs, dict) else spec[1]
    model_classes = keras.tree.flatten(network.output)[0].shape[-1]
    if labels.shape[-1] != model_classes:
        raise ValueError(
            f"The dataset has {labels.shape[-1]} classes but the model "
            f"outputs {model_classes} class scores. Received: labels of "
            f"shape {tuple(labels.shape)}")
