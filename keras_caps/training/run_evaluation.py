"""`evaluate`: a saved `.keras` model's test metrics, behind
`keras-caps evaluate`.

The test set is read as the run that trained the model read it, from the
run's `metrics.json` beside the model (`read_run_record`); a dataset a
user brings is read again with the run's read options
(`evaluation_data`) and checked against the model's input and classes.
"""

import os

import keras
import numpy as np

from keras_caps import datasets
from keras_caps import model_roles as roles
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.datasets.user_data.user_dataset import resolve_user_dataset
from keras_caps.inference import check_pixel_range
from keras_caps.inference import load_model_file
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.training.class_evaluation import keras_class_report
from keras_caps.training.class_report import check_single_label
from keras_caps.training.data_batches import first_batch
from keras_caps.training.hardware import describe_hardware
from keras_caps.training.model_building import check_batches
from keras_caps.training.model_building import check_labels_match
from keras_caps.training.user_data import check_model_matches_data
from keras_caps.training.user_data import recorded_read_options
from keras_caps.training.user_data import refuse_read_options
from keras_caps.validation import check_known_name


def evaluate(model_path, dataset, *, batch_size=16, data_dir=None, seed=42,
             dataset_options=None, download=True, image_size=None,
             color_mode=None, test_dir=None, test_share=None,
             class_report=False):
    """Evaluates a saved `.keras` model on the test split of `dataset`.

    When the model comes from `train` (a `metrics.json` beside it), the
    test set is built with the loader options that run used (e.g.
    CapsNet's 4-pixel MultiMNIST shifts); `dataset_options` override them.
    `download=False` reads prepared TFDS datasets only (see
    `keras_caps.datasets.load`).

    A dataset a user brings (`"folder:PATH"`, `"npz:PATH"`,
    `"tfds:NAME"`) is read as the run that trained the model read it (its
    image size, colour mode and test data, from the `metrics.json` beside
    the model) unless `image_size`, `color_mode`, `test_dir` or
    `test_share` are given; without a run record, at the model's input
    size and colour mode. Images or classes that differ from the model's
    (its input shape, the `class_names.json` beside it) are refused.

    With `class_report=True` the record also holds `"class_report"`:
    per-class precision, recall, F1 and support, their averages and the
    confusion matrix (`keras_caps.training.class_report`), named with
    the `class_names.json` beside the model (else the class ids); refused
    for MultiMNIST, whose images hold two classes.

    Example:

    ```python
    record = evaluate("runs/cats/model.keras", "folder:my_images",
                      class_report=True)
    record["test"]["accuracy"], record["class_report"]["macro"]["f1"]
    ```
    """
    if class_report:
        check_single_label(dataset, "`class_report`")
    read_options = {"image_size": image_size, "color_mode": color_mode,
                    "test_dir": test_dir, "test_share": test_share}
    if not is_user_dataset(dataset):
        check_known_name("dataset", dataset, datasets.DATASETS)
        refuse_read_options(dataset, read_options)
    network = load_model_file(model_path, "model_path")
    if not getattr(network, "compiled", False):
        raise ValueError(
            "`model_path` holds a model saved without its compiled loss "
            "and metrics, which `evaluate` needs: save the model from an "
            "application builder (compile=True) or `keras-caps train`. "
            f"Received: model_path={model_path!r}")
    reconstruction = roles.LABEL in {layer.name for layer in network.layers}
    record = read_run_record(model_path)
    result = {"model_path": os.path.abspath(model_path), "dataset": dataset}
    if is_user_dataset(dataset):
        user_data = evaluation_data(
            tuple(roles.image_input(network).shape[1:]), model_path,
            dataset, record, read_options, (data_dir, download))
        test = user_data.load("test", batch_size=batch_size, seed=seed,
                              reconstruction=reconstruction)
        result["data_source"] = user_data.source_record()
    else:
        options = {}
        if record.get("dataset") == dataset:
            options.update(record.get("dataset_options", {}))
        options.update(dataset_options or {})
        test = datasets.load(dataset, "test", batch_size=batch_size,
                             data_dir=data_dir, seed=seed,
                             reconstruction=reconstruction,
                             download=download, **options)
    check_batches(test, "test", dataset, batch_size)
    check_labels_match(network, test)
    inputs = first_batch(test)[0]
    check_pixel_range(np.asarray(roles.batch_images(inputs)),
                      f"the {dataset!r} test images")
    metrics = network.evaluate(test, return_dict=True, verbose=0)
    if class_report:
        result["class_report"] = keras_class_report(network, test,
                                                    model_path)
    return {**result, "hardware": describe_hardware(),
            "backend": keras.backend.backend(),
            "test": {key: float(value) for key, value in metrics.items()}}


def evaluation_data(image_shape, model_path, dataset, record, read_options,
                    source):
    """The `UserDataset` a model taking `image_shape` images is evaluated
    on: read as its run read it
    (the run record's `data_source`: its test split too, unless a test
    folder or share is given), else at the model's input size and colour
    mode, with the read options given over either."""
    data_dir, download = source
    given = {name: value for name, value in read_options.items()
             if value is not None}
    if record.get("dataset") == dataset and record.get("data_source"):
        options = recorded_read_options(record["data_source"], data_dir)
        if {"test_dir", "test_share"} & set(given):  # The user's split.
            for name in ("test_dir", "test_share", "seed"):
                options.pop(name, None)
        options.update(given)
    else:
        _check_test_images_known(dataset, model_path, given, record)
        height, width, channels = image_shape
        options = {"image_size": (height, width), "data_dir": data_dir,
                   "color_mode": {1: "grayscale", 3: "rgb"}.get(channels),
                   **given}
    data = resolve_user_dataset(dataset, download=download, **options)
    check_model_matches_data(image_shape, data, model_path)
    return data


def _check_test_images_known(dataset, model_path, given, record):
    """Refuses a folder's test share when no run record says which of its
    images the model trained on (none, or one of this folder without its
    data source): the default share would be drawn anew and could hold
    training images. A run on another dataset never saw the folder."""
    trained_elsewhere = record and record.get("dataset") != dataset
    if (not dataset.startswith("folder:") or trained_elsewhere
            or {"test_dir", "test_share"} & set(given)):
        return
    raise ValueError(
        f"No record of the run that trained {model_path!r} on {dataset} "
        "(its metrics.json, beside the model) says which of the folder's "
        "images it trained on, so a test share of the folder could hold "
        "training images. Evaluate the model where `keras-caps train` "
        "wrote it, or pass --test-dir (images it never saw) or the "
        "--test-share its run used.")


def read_run_record(model_path):
    """The `metrics.json` of the run beside `model_path` (`{}` if none)."""
    path = os.path.join(os.path.dirname(os.path.abspath(model_path)),
                        "metrics.json")
    if not os.path.exists(path):
        return {}
    try:
        return read_json_record(path)
    except UnreadableRecordError as error:
        message = (
            f"{error} evaluate reads the test-set options of the run from "
            "the metrics.json beside the model. Repair or delete it, or "
            "rerun the `keras-caps train` command that made the run: it "
            "writes the file again from its run.json, without training.")
    raise ValueError(message) from None
