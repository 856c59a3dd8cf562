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
from keras_caps.training.data_batches import numpy_batches
from keras_caps.training.hardware import describe_hardware
from keras_caps.training.run_evaluation import evaluation_data
from keras_caps.training.run_evaluation import read_run_record
from keras_caps.training.user_data import refuse_read_options
from keras_caps.validation import check_known_name

# Datasets whose images hold more than one class (their accuracy is not
# the argmax's): evaluated with the `.keras` file.
_MULTI_LABEL = ("multi_mnist",)


def evaluate_export(export_path, dataset, *, batch_size=16, data_dir=None,
                    seed=42, dataset_options=None, download=True,
                    image_size=None, color_mode=None, test_dir=None,
                    test_share=None):
    """The test accuracy of the export at `export_path` on `dataset`.

    The export runs in its own runtime (`ExportedClassifier`: TensorFlow,
    ONNX Runtime, the LiteRT interpreter or OpenVINO); an image is right
    when its highest class score is its label's. The arguments are
    `keras_caps.training.evaluate`'s; the test split and a user's read
    options come from the run record of the model the export was made
    from (beside its `.keras` file), and a folder's test share is refused
    without it, as for the `.keras` file.

    Returns:
        dict: `{"model_path", "export_format", "dataset", "test":
        {"accuracy"}, "test_images", "hardware", "backend"}`.

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
    if dataset in _MULTI_LABEL:
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
    correct, count = _score(classifier, test, dataset)
    return {"model_path": os.path.abspath(export_path),
            "export_format": classifier.export_format,
            "dataset": dataset, "test": {"accuracy": correct / count},
            "test_images": count, "hardware": describe_hardware(),
            "backend": keras.backend.backend()}


def _score(classifier, test, dataset):
    """`(right, images)` of `classifier` on the batches `test`."""
    correct = count = 0
    for images, labels in numpy_batches(test):
        images = np.asarray(keras.tree.flatten(images)[0], "float32")
        if count == 0:
            check_pixel_range(images, f"the {dataset!r} test images")
        labels = np.asarray(labels)
        if labels.shape[-1] != classifier.num_classes:
            raise ValueError(
                f"The dataset has {labels.shape[-1]} classes but the export "
                f"outputs {classifier.num_classes} class scores.")
        scores = classifier(images)[classifier.score_name]
        correct += int(np.sum(np.argmax(scores, -1)
                              == np.argmax(labels, -1)))
        count += len(images)
    if count == 0:
        raise ValueError(f"The {dataset!r} test split holds no images.")
    return correct, count


def _source_model(classifier):
    """The `.keras` file the export was made from, if it is still there."""
    path = classifier.marker.get("model_path")
    return path if isinstance(path, str) and os.path.isfile(path) else None
