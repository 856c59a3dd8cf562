"""`evaluate_export`: the test accuracy of an export (SavedModel, ONNX,
LiteRT or OpenVINO) in its own runtime, behind `keras-caps evaluate
--model-path EXPORT_FOLDER`.

The test set is the one of the `.keras` file the export was made from
(`"model_path"` in its `keras_caps_export.json`): read with the options
of that model's run record, as `evaluate` reads it for the `.keras` file,
so an export is scored on the same images as its model.
"""

import os

import keras
import numpy as np

from keras_caps import datasets
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.inference import ExportedClassifier
from keras_caps.inference import check_pixel_range
from keras_caps.training.class_evaluation import report_with_names
from keras_caps.training.class_report import MULTI_LABEL_DATASETS
from keras_caps.training.data_batches import numpy_batches
from keras_caps.training.hardware import describe_hardware
from keras_caps.training.run_evaluation import evaluation_data
from keras_caps.training.run_evaluation import read_run_record
from keras_caps.training.user_data import refuse_read_options
from keras_caps.validation import check_known_name


def evaluate_export(export_path, dataset, *, batch_size=16, data_dir=None,
                    seed=42, dataset_options=None, download=True,
                    image_size=None, color_mode=None, test_dir=None,
                    test_share=None, class_report=False):
    """The test accuracy of the export at `export_path` on `dataset`.

    The export runs in its own runtime (`ExportedClassifier`: TensorFlow,
    ONNX Runtime, the LiteRT interpreter or OpenVINO); an image is right
    when its highest class score is its label's. The arguments are
    `keras_caps.training.evaluate`'s; the test split and a user's read
    options come from the run record of the model the export was made
    from (beside its `.keras` file), and a folder's test share is refused
    without it, as for the `.keras` file. `class_report=True` adds the
    per-class report of `evaluate(..., class_report=True)`.

    Returns:
        dict: `{"model_path", "export_format", "dataset", "test":
        {"accuracy"}, "test_images", "hardware", "backend"}` (and
        `"class_report"`).

    Raises:
        ValueError: not an unchanged export of keras_caps, a multi-digit
            dataset (score it with the `.keras` file), images or classes
            that differ from the export's.

    Example:

    ```python
    record = evaluate_export("exported/mnist_litert", "mnist")
    record["test"]["accuracy"]
    ```
    """
    classifier = ExportedClassifier(export_path, "model_path")
    if dataset in MULTI_LABEL_DATASETS:
        raise ValueError(
            f"An export is scored by its highest class score, which does "
            f"not score {dataset!r}'s two digits per image: evaluate the "
            ".keras file it was exported from. Received: "
            f"dataset={dataset!r}")
    read_options = {"image_size": image_size, "color_mode": color_mode,
                    "test_dir": test_dir, "test_share": test_share}
    source_model = _source_model(classifier)
    record = read_run_record(source_model) if source_model else {}
    if is_user_dataset(dataset):
        data = evaluation_data(
            classifier.image_shape, source_model or export_path, dataset,
            record, read_options, (data_dir, download))
        test = data.load("test", batch_size=batch_size, seed=seed,
                         reconstruction=False)
    else:
        check_known_name("dataset", dataset, datasets.DATASETS)
        refuse_read_options(dataset, read_options)
        options = dict(record.get("dataset_options", {})
                       if record.get("dataset") == dataset else {})
        options.update(dataset_options or {})
        test = datasets.load(dataset, "test", batch_size=batch_size,
                             data_dir=data_dir, seed=seed,
                             reconstruction=False, download=download,
                             **options)
    labels, predicted = _classes(classifier, test, dataset)
    record = {"model_path": os.path.abspath(export_path),
              "export_format": classifier.export_format,
              "dataset": dataset,
              "test": {"accuracy": float(np.mean(labels == predicted))},
              "test_images": len(labels), "hardware": describe_hardware(),
              "backend": keras.backend.backend()}
    if class_report:
        record["class_report"] = report_with_names(
            labels, predicted, export_path, classifier.num_classes)
    return record


def _classes(classifier, test, dataset):
    """`(labels, predicted)`: the true and the predicted class of every
    image of the batches `test`, by `classifier`."""
    labels, predicted = [], []
    for images, one_hot in numpy_batches(test):
        images = np.asarray(keras.tree.flatten(images)[0], "float32")
        if not labels:
            check_pixel_range(images, f"the {dataset!r} test images")
        one_hot = np.asarray(one_hot)
        if one_hot.shape[-1] != classifier.num_classes:
            raise ValueError(
                f"The dataset has {one_hot.shape[-1]} classes but the "
                f"export outputs {classifier.num_classes} class scores.")
        scores = classifier(images)[classifier.score_name]
        labels.append(np.argmax(one_hot, -1))
        predicted.append(np.argmax(scores, -1))
    if not labels:
        raise ValueError(f"The {dataset!r} test split holds no images.")
    return np.concatenate(labels), np.concatenate(predicted)


def _source_model(classifier):
    """The `.keras` file the export was made from, if it is still there."""
    path = classifier.marker.get("model_path")
    return path if isinstance(path, str) and os.path.isfile(path) else None
