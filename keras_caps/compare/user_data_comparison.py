"""`keras-caps compare` on a dataset a user brings (`folder:PATH`,
`npz:PATH`, `tfds:NAME`): the data record of `compare.json` and each
model's clean test evaluation.

The comparison's `"data"` is `{"data_dir": ..., "source": <the data's
UserDataset.source_record()>}` (with its content fingerprint: a changed
folder is refused on resume, as other data is), and its `"preset"` the
`CapsuleClassifier` preset every model trains with (the closest to the
images by default, see `keras_caps.training.preset_choice.closest_preset`).
The corruptions of `keras_caps.evaluation.robustness` read the built-in
test sets, so a comparison on a user's data measures clean accuracy only.
"""

import os

import keras

from keras_caps.diagnostics.costs import cost_record
from keras_caps.evaluation import robustness
from keras_caps.training.training_settings import TrainingSettings
from keras_caps.training.user_data import read_user_data
from keras_caps.training.user_data import recorded_read_options

NO_CORRUPTIONS = {"noise": [], "pixels": [], "occlusion": [],
                  "affine": False}
"""The normalised corruptions of a comparison on a user's data: none."""


def read_comparison_data(model, dataset, preset, read_options, *,
                         data_dir=None, download=True):
    """Reads a user's dataset for a comparison.

    Args:
        model: str. The `keras-caps train --model` name of the first
            compared model (every compared family shares its presets).
        dataset: str. The user's spec.
        preset: str or `None`. The preset, else the closest.
        read_options: dict of `image_size`, `color_mode`, `test_dir`,
            `test_share` (see `keras_caps.training.user_data`).
        data_dir: str or `None`. The TFDS data directory (`tfds:` only).
        download: bool. Let TFDS download the dataset.

    Returns:
        `(preset, data)`: the preset's name, and the `"data"` record.

    Example:

    ```python
    preset, data = read_comparison_data(
        "dynamic", "folder:my_images", None,
        {"image_size": 28})
    ```
    """
    settings = TrainingSettings(model, dataset, preset=preset)
    _, settings = read_user_data(settings, read_options,
                                 data_dir=data_dir, download=download)
    folder = None if data_dir is None else os.path.abspath(data_dir)
    return settings.preset_name(), {"data_dir": folder,
                                    "source": settings.data_source}


def evaluate_on_user_data(model_path, source, *, data_dir=None,
                          download=True, batch_size=256):
    """The clean test accuracy of a compared model on a user's data, as a
    `robustness.evaluate_robustness` record without corruptions.

    Args:
        model_path: str. The model's `.keras` file.
        source: dict. The data's `source_record()` (`compare.json`).
        data_dir: str or `None`. The TFDS data directory.
        download: bool. Let TFDS download the dataset.
        batch_size: int. Prediction batch size.

    Example:

    ```python
    record = evaluate_on_user_data("runs/compare/models/cnn_seed0/"
                                   "model.keras", data["source"])
    record["clean"]["accuracy"]
    ```
    """
    from keras_caps.datasets.user_data.user_dataset import resolve_user_dataset

    data = resolve_user_dataset(source["spec"], download=download,
                                **recorded_read_options(source, data_dir))
    images, labels = data.arrays.test
    images = images.astype("float32")  # Raw pixels, as the loaders yield.
    model = keras.saving.load_model(model_path)
    predictor = robustness.classifier(model)

    _, scores = robustness.clean_scores(predictor, images, labels,
                                        batch_size)
    return {"dataset": source["spec"], "seed": None, **scores,
            **cost_record(model)}
