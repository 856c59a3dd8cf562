"""Reads any TFDS image-classification dataset (`tfds:NAME[:VERSION]`).

The image and label features are found in the dataset's `info.features`:
exactly one `tfds.features.Image` and one `tfds.features.ClassLabel` at the
top level (other features, such as an `id`, are ignored); class names come
from the label feature. The `train` and `test` splits are decoded into
memory once, up front (checked against the memory available first),
converted to `image_size` and `color_mode` as image files are
(`image_arrays.convert_images`).

Data: the TFDS data directory `data_dir` (or `$KERAS_CAPS_DATA_DIR`, else
the TFDS default); a dataset that is not prepared there is downloaded and
prepared unless `download=False`, as `keras_caps.datasets.sources.load_tfds`
does (which also probes the download hosts first). A pinned version
(`tfds:NAME:VERSION`) is read with `tfds.load` directly.
"""

import numpy as np
import tensorflow_datasets as tfds

from keras_caps.datasets import prepared_folders
from keras_caps.datasets import sources
from keras_caps.datasets.user_data import image_arrays
from keras_caps.datasets.user_data import image_memory

SPLITS = ("train", "test")


def read_tfds_images(name, *, image_size=None, color_mode=None,
                     data_dir=None, download=True):
    """Decodes the train and test splits of a TFDS image dataset.

    Args:
        name: str. A TFDS name, optionally with a version:
            `"svhn_cropped"`, `"svhn_cropped:3.1.0"`.
        image_size: `(height, width)` or None (the dataset's size; required
            when its images vary in size).
        color_mode: "grayscale", "rgb" or None (the dataset's channels).
        data_dir: str or None. The TFDS data directory.
        download: bool. Download and prepare a dataset that is not prepared.

    Returns:
        An `ImageArrays` with both splits.

    Raises:
        ValueError: an unknown name, a dataset that is not image
            classification, no `train` or `test` split, images of varying
            size without `image_size`, data that cannot be read or
            downloaded, or more images than memory allows.

    Example:

    >>> arrays = read_tfds_images("svhn_cropped")  # doctest: +SKIP
    >>> arrays.class_names[:3]  # doctest: +SKIP
    ('0', '1', '2')
    """
    data_dir = sources.resolve_data_dir(data_dir)
    base, _, version = name.partition(":")
    builder = _builder(name, data_dir)
    image_key, label_key = _feature_keys(builder, name)
    shape = _image_shape(builder.info.features[image_key], image_size,
                         color_mode, name)
    splits = {}
    for split in SPLITS:
        examples = _load(base, version, split, data_dir, download)
        if split == "train":
            _check_splits(name, data_dir)
        image_memory.check_fits_in_memory(_count(examples), shape,
                                          f"dataset tfds:{name} ({split})")
        with prepared_folders.read_errors_named(base, split, data_dir,
                                                download):
            splits[split] = _decode(examples, image_key, label_key,
                                    shape, color_mode)
    label_feature = builder.info.features[label_key]
    source = {"kind": "tfds", "name": base,
              "version": str(builder.version), "data_dir": data_dir,
              "image_key": image_key, "label_key": label_key,
              "num_examples": {split: len(labels)
                               for split, (_, labels) in splits.items()}}
    return image_arrays.ImageArrays(
        train=splits["train"], test=splits["test"],
        class_names=tuple(label_feature.names), source=source)


def _builder(name, data_dir):
    try:
        return tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        raise ValueError(
            "Received an invalid value for `dataset`: TFDS has no dataset "
            f"named {name!r} (see https://www.tensorflow.org/datasets/"
            f"catalog). Received: dataset='tfds:{name}'") from None
    except (AssertionError, ValueError, OSError) as error:
        raise ValueError(
            f"Received an invalid value for `dataset`: TFDS cannot open "
            f"{name!r}: {error}. Received: dataset='tfds:{name}'") from None


def _feature_keys(builder, name):
    """The keys of the one Image and the one ClassLabel feature."""
    features = builder.info.features
    images = [key for key, feature in features.items()
              if isinstance(feature, tfds.features.Image)]
    labels = [key for key, feature in features.items()
              if isinstance(feature, tfds.features.ClassLabel)]
    if len(images) != 1 or len(labels) != 1:
        found = {key: type(feature).__name__
                 for key, feature in features.items()}
        raise ValueError(
            f"Received an invalid value for `dataset`: tfds:{name} is not "
            "an image classification dataset: expected exactly one Image "
            "and one ClassLabel feature. Received the features "
            f"{found}.")
    return images[0], labels[0]


def _image_shape(feature, image_size, color_mode, name):
    """`(height, width, channels)` of the decoded, converted images."""
    height, width, channels = feature.shape
    if channels not in (1, 3) and color_mode is None:
        raise ValueError(
            f"The images of tfds:{name} have {channels} channels; pass "
            "`color_mode` (--color-mode grayscale or rgb).")
    if image_size is None and (height is None or width is None):
        raise ValueError(
            f"The images of tfds:{name} vary in size; pass `image_size` "
            "(--image-size 28, or HEIGHT,WIDTH such as 32,24) to resize "
            "them to one size.")
    if image_size is not None:
        height, width = image_size
    if color_mode is not None:
        channels = image_arrays.CHANNELS[color_mode]
    return height, width, channels


def _load(base, version, split, data_dir, download):
    if not version:
        return sources.load_tfds(base, split, data_dir, download)
    try:
        return tfds.load(f"{base}:{version}", split=split,
                         data_dir=data_dir, download=download,
                         try_gcs=False, shuffle_files=False)
    except (AssertionError, OSError, ValueError,
            tfds.download.DownloadError) as error:
        raise ValueError(
            f"Cannot read the {split!r} split of tfds:{base}:{version} in "
            f"{data_dir or 'the default TFDS data directory'}: {error}"
        ) from None


def _check_splits(name, data_dir):
    splits = sorted(tfds.builder(name, data_dir=data_dir).info.splits)
    if splits and any(split not in splits for split in SPLITS):
        raise ValueError(
            f"Received an invalid value for `dataset`: tfds:{name} needs a "
            f"'train' and a 'test' split. Received the splits {splits}.")


def _count(examples):
    count = int(examples.cardinality())
    return max(count, 0)


def _decode(examples, image_key, label_key, shape, color_mode):
    """`(images, labels)`: uint8 `(num, *shape)` and int64 `(num,)`."""
    images, labels = [], []
    for example in tfds.as_numpy(examples):
        image = example[image_key]
        image = image_arrays.convert_images(
            _as_rgb_or_gray(image[None]), shape[:2], color_mode)
        images.append(image[0])
        labels.append(example[label_key])
    if not images:
        return np.zeros((0, *shape), "uint8"), np.zeros(0, "int64")
    return np.stack(images), np.asarray(labels, "int64")


def _as_rgb_or_gray(images):
    """Drops an alpha channel (RGBA, gray+alpha)."""
    if images.shape[-1] == 4:
        return images[..., :3]
    if images.shape[-1] == 2:
        return images[..., :1]
    return images
