"""A random sample of a run's training images, behind `keras-caps export
--quantize int8 --calibration-images N`: the representative data that
calibrates a LiteRT export's 8-bit activations.

The images are read as the run that trained the model read them (its
`metrics.json` beside the `.keras` file names the dataset and its read
options), from the training split only: a test image never calibrates.
"""

import keras
import numpy as np

from keras_caps import datasets
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.training.data_batches import numpy_batches
from keras_caps.training.run_evaluation import evaluation_data
from keras_caps.training.run_evaluation import read_run_record

_BATCH_SIZE = 256


def calibration_images(model_path, image_shape, count, *, data_dir=None,
                       download=True, seed=42):
    """`count` training images of the run that trained `model_path`, drawn
    at random without replacement (a function of `seed`), in raw pixels.

    Args:
        model_path: str. A `.keras` file written by `keras-caps train`.
        image_shape: `(height, width, channels)` of the model's input.
        count: int. How many images (all of them if the split holds fewer).
        data_dir: str or `None`. Where the run's data is, as for `train`.
        download: bool. Let TFDS download a built-in dataset.
        seed: int. Seeds the draw.

    Returns:
        float32 array `(count, height, width, channels)`.

    Raises:
        ValueError: no run record beside `model_path` (nothing says which
            images trained it), or its training split holds no images.

    Example:

    ```python
    images = calibration_images("runs/mnist/model.keras", (28, 28, 1), 500)
    ```
    """
    record = read_run_record(model_path)
    dataset = record.get("dataset")
    if not dataset:
        raise ValueError(
            "`--calibration-images` draws training images of the run that "
            f"trained {model_path!r}, named by the run's metrics.json "
            "beside it, which is missing. Export a model where `keras-caps "
            "train` wrote it, or pass `representative_images` to "
            "keras_caps.export.export_inference_model from Python.")
    training = _training_batches(model_path, image_shape, dataset, record,
                                 (data_dir, download))
    sample = _random_sample(training, count, seed)
    if sample is None:
        raise ValueError(f"The training split of {dataset!r} holds no "
                         "images to calibrate with.")
    return sample


def _training_batches(model_path, image_shape, dataset, record, source):
    """Unshuffled, unaugmented batches of the whole training split (the
    holdout included: they are all training images)."""
    options = {"batch_size": _BATCH_SIZE, "training": False,
               "validation": "test", "reconstruction": False}
    if is_user_dataset(dataset):
        read_options = dict.fromkeys(
            ("image_size", "color_mode", "test_dir", "test_share"))
        data = evaluation_data(image_shape, model_path, dataset, record,
                               read_options, source)
        return data.load("train", **options)
    data_dir, download = source
    return datasets.load(dataset, "train", data_dir=data_dir,
                         download=download,
                         **record.get("dataset_options", {}), **options)


def _random_sample(batches, count, seed):
    """`count` images drawn uniformly without replacement from `batches`
    in one pass, keeping only `count` at a time: each image gets a random
    key and the `count` smallest keys stay (in key order)."""
    random = np.random.default_rng(seed)
    kept, keys = None, None
    for inputs, _ in numpy_batches(batches):
        images = np.asarray(keras.tree.flatten(inputs)[0], "float32")
        batch_keys = random.random(len(images))
        if kept is not None:
            images = np.concatenate([kept, images])
            batch_keys = np.concatenate([keys, batch_keys])
        order = np.argsort(batch_keys, kind="stable")[:count]
        kept, keys = images[order], batch_keys[order]
    return kept
