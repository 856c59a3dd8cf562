"""The training recipe's side of datasets a user brings (`folder:PATH`,
`npz:PATH`, `tfds:NAME`): reading them for a run, building the model for
their images, and reading them again for `evaluate` (and refusing their
read options with a built-in dataset).

A run records the data's `UserDataset.source_record()` in its settings
(`TrainingSettings.data_source`): the options it was read with (image
size, colour mode, test data) and a content fingerprint. Settings that
carry it (a resumed run, a comparison's model) read the data again with
those options and refuse data that changed.
"""

import dataclasses
import json

import numpy as np

from keras_caps.datasets import holdout
from keras_caps.datasets.user_data.user_dataset import resolve_user_dataset
from keras_caps.inference.class_names import find_class_names

# The read options a caller may pass, by their command-line flags.
READ_OPTIONS = {"image_size": "--image-size", "color_mode": "--color-mode",
                "test_dir": "--test-dir", "test_share": "--test-share"}


def read_user_data(settings, read_options, *, data_dir=None, download=True):
    """Reads the dataset of `settings` (a dataset a user brings).

    Args:
        settings: `TrainingSettings` whose `dataset` is a user's spec.
        read_options: dict with any of `READ_OPTIONS` (`image_size`,
            `color_mode`, `test_dir`, `test_share`), or `None`. Refused
            when `settings.data_source` is set: the data is then read with
            the options it records, and must be unchanged.
        data_dir: str or `None`. The TFDS data directory (`tfds:` only).
        download: bool. Let TFDS download the dataset.

    Returns:
        `(data, settings)`: the `UserDataset`, and `settings` with its
        `data_source` filled in.

    Raises:
        ValueError: bad options or data (see `resolve_user_dataset`), or
            data that differs from the recorded `data_source`.

    Example:

    ```python
    settings = TrainingSettings("efficient_capsnet", "folder:my_images")
    data, settings = read_user_data(settings, {"image_size": 28})
    ```
    """
    given = {name: value for name, value in (read_options or {}).items()
             if value is not None}
    unknown = sorted(set(given) - set(READ_OPTIONS))
    if unknown:
        raise TypeError(f"Unknown read options {unknown}. Expected some of "
                        f"{list(READ_OPTIONS)}.")
    recorded = settings.data_source
    if recorded is None:
        data = resolve_user_dataset(settings.dataset, data_dir=data_dir,
                                    download=download, **given)
        return data, dataclasses.replace(
            settings, data_source=_jsonable(data.source_record()))
    if given:
        raise ValueError(
            "The settings already record how their data is read "
            "(`data_source`); the read options "
            f"{[READ_OPTIONS[name] for name in given]} cannot change it. "
            f"Received: {given!r}")
    data = resolve_user_dataset(settings.dataset, download=download,
                                **recorded_read_options(recorded, data_dir))
    _check_unchanged(settings.dataset, recorded, data.source_record())
    return data, settings


def refuse_read_options(dataset, read_options):
    """Raises when options for a dataset a user brings (any of
    `READ_OPTIONS` not `None` in `read_options`) come with the built-in
    dataset `dataset`."""
    given = [READ_OPTIONS[name] for name, value in read_options.items()
             if value is not None]
    if given:
        raise ValueError(
            f"The options of datasets a user brings (folder:PATH, "
            f"npz:PATH, tfds:NAME) do not apply to {dataset!r}, which has a "
            f"fixed image size and test split: drop {', '.join(given)}. "
            f"Received: dataset={dataset!r}"
            ", " + ", ".join(f"{name}={value!r}"
                             for name, value in read_options.items()
                             if value is not None))


def recorded_read_options(source, data_dir=None):
    """The `resolve_user_dataset` options that read the data of a
    `source_record()` again the same way (`data_dir`: the recorded TFDS
    data directory, else the given one)."""
    height, width = source["image_size"]
    options = {"image_size": (height, width),
               "color_mode": source["color_mode"],
               "data_dir": source.get("data_dir") or data_dir}
    test = source.get("test", {})
    if test.get("source") == "test_dir":
        options["test_dir"] = test["path"]
    elif test.get("source") == "test_share":
        options.update(test_share=test["share"], seed=test["seed"])
    return options


def _check_unchanged(spec, recorded, current):
    current = _jsonable(current)
    changed = sorted(key for key in set(recorded) | set(current)
                     if recorded.get(key) != current.get(key))
    if changed:
        raise ValueError(
            f"The data of {spec} changed since this run's settings were "
            f"recorded: {', '.join(changed)} differ (recorded: "
            f"{ {key: recorded.get(key) for key in changed} }; now: "
            f"{ {key: current.get(key) for key in changed} }). Train it in "
            "a new output folder, or pass --fresh (`fresh=True`).")


def _jsonable(record):
    return json.loads(json.dumps(record))


def training_statistics(data, *, seed, validation):
    """Per-channel `(mean, variance)` of the images a model trains on
    (the training data minus the holdout, or all of it under
    `validation="test"`), raw pixel units, for presets that standardise
    their input."""
    images, _ = holdout.select_split(
        {"train": data.arrays.train, "test": data.arrays.test}, "train",
        validation, seed)
    pixels = images.reshape(-1, images.shape[-1]).astype(np.float64)
    return (pixels.mean(axis=0).astype(np.float32),
            pixels.var(axis=0).astype(np.float32))


def build_for_user_data(family, settings, data, input_statistics):
    """The family's model on the preset of `settings` for the images and
    classes of `data`; a `ValueError` naming `--image-size` when the
    architecture cannot take images of that size."""
    preset = settings.preset_name()
    try:
        return family.build(preset, reconstruction=settings.reconstruction,
                            input_statistics=input_statistics,
                            input_shape=data.info.input_shape,
                            num_classes=data.info.num_classes,
                            **settings.builder_options())
    except ValueError as error:
        height, width, channels = data.info.input_shape
        raise ValueError(
            f"{family.name} with the {preset!r} preset cannot take the "
            f"{height}x{width}x{channels} images of {settings.dataset} "
            f"({error}). Resize the images with `image_size` "
            "(--image-size), or choose another `preset` (--preset).") from None


def check_model_matches_data(image_shape, data, model_path):
    """Raises when `data`'s images or classes differ from the model's
    input `image_shape` `(height, width, channels)` or from the class
    names kept beside `model_path` (a `.keras` file or an export)."""
    expected = tuple(image_shape)
    if tuple(data.info.input_shape) != expected:
        height, width, channels = expected
        raise ValueError(
            f"The model {model_path!r} takes {height}x{width}x{channels} "
            f"images, but {data.spec} was read as "
            f"{'x'.join(map(str, data.info.input_shape))}. Pass "
            f"--image-size {height},{width} and --color-mode "
            f"{'grayscale' if channels == 1 else 'rgb'} (`image_size`, "
            "`color_mode`).")
    kept = find_class_names(model_path)
    if kept is not None and list(kept) != list(data.class_names):
        raise ValueError(
            f"The classes of {data.spec} {list(data.class_names)} differ "
            f"from those the model {model_path!r} was trained on "
            f"{list(kept)} (its class_names.json): its scores would be "
            "compared with the wrong labels.")


def check_same_data(recorded_settings, settings, output_dir):
    """Raises, naming what changed, when the run in `output_dir` was
    trained on other contents of the same user's dataset.

    Args:
        recorded_settings: dict. The `settings` of the run's `run.json`.
        settings: `TrainingSettings` of this call (with `data_source`).
        output_dir: str. The run's folder, for the message.
    """
    recorded = recorded_settings.get("data_source")
    if (not settings.is_user_data() or not isinstance(recorded, dict)
            or recorded_settings.get("dataset") != settings.dataset):
        return
    current = _jsonable(settings.data_source)
    changed = sorted(key for key in set(recorded) | set(current)
                     if recorded.get(key) != current.get(key))
    if not changed:
        return
    before, now = recorded.get("fingerprint"), current.get("fingerprint")
    counts = ""
    if isinstance(before, dict) and isinstance(now, dict):
        counts = (f" (then {before.get('files')} files, "
                  f"{before.get('bytes')} bytes; now {now.get('files')} "
                  f"files, {now.get('bytes')} bytes)")
    raise ValueError(
        f"The data of {settings.dataset} is not what the run in "
        f"{output_dir!r} was trained on: its {', '.join(changed)} changed"
        f"{counts}. Nothing was changed. Restore the data to resume that "
        "run, train in another --output-dir, or pass --fresh "
        "(`fresh=True`) to delete that run's files and start over.")
