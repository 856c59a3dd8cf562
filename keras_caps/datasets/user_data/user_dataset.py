"""Datasets a user brings: a folder of images, a `.npz` file, a TFDS name.

A user's dataset is named by a spec string:

- `folder:PATH`: a folder of class subfolders of image files (PNG, JPEG,
  BMP, GIF), see `keras_caps.datasets.user_data.image_folder`. Its test
  data is a second such folder (`test_dir`, with the same classes) or a
  seeded, class-stratified share of the folder (`test_share`, default
  `0.2`), carved out before the validation holdout.
- `npz:PATH`: a NumPy `.npz` file with `x_train`, `y_train`, `x_test`,
  `y_test` (optionally `class_names`), see
  `keras_caps.datasets.user_data.npz_arrays`.
- `tfds:NAME` or `tfds:NAME:VERSION`: any TFDS image-classification
  dataset with a `train` and a `test` split, see
  `keras_caps.datasets.user_data.tfds_images`.

`resolve_user_dataset` reads and checks the whole dataset up front (every
image is decoded into memory once), so that bad data fails with a clear
error before training, and returns a `UserDataset`, whose `load` yields
batches exactly like the built-in loaders (`keras_caps.datasets.load`).
"""

import dataclasses
import functools
import hashlib
import logging
import os

import numpy as np

from keras_caps.datasets import dataset_info
from keras_caps.datasets import holdout
from keras_caps.datasets.user_data import image_arrays
from keras_caps.datasets.user_data import image_folder
from keras_caps.datasets.user_data import npz_arrays
from keras_caps.validation import check_bool
from keras_caps.validation import check_number

SPEC_PREFIXES = ("folder:", "npz:", "tfds:")
DEFAULT_TEST_SHARE = 0.2


def is_user_dataset(spec):
    """Whether `spec` names a dataset a user brings (`folder:`, `npz:`,
    `tfds:`) rather than a built-in one.

    Example:

    >>> is_user_dataset("folder:my_images"), is_user_dataset("mnist")
    (True, False)
    """
    return isinstance(spec, str) and spec.startswith(SPEC_PREFIXES)


def resolve_user_dataset(spec, *, image_size=None, color_mode=None,
                         test_dir=None, test_share=None, data_dir=None,
                         download=True, seed=42):
    """Reads and checks a user's dataset; see the module docstring.

    Args:
        spec: str. `"folder:PATH"`, `"npz:PATH"` or `"tfds:NAME[:VERSION]"`.
        image_size: int (a square), `(height, width)` or None. Resize every
            image to it; None keeps the data's size (a folder's images must
            then share one size).
        color_mode: "grayscale", "rgb" or None (a folder: grayscale when
            every file is grayscale, else rgb; arrays and TFDS: as stored).
        test_dir: str or None. `folder:` only: a folder of the same class
            subfolders holding the test images.
        test_share: float in (0, 1) or None. `folder:` only, without
            `test_dir`: the share of each class held out as test data.
            Defaults to `DEFAULT_TEST_SHARE` (0.2).
        data_dir: str or None. `tfds:` only: the TFDS data directory.
        download: bool. `tfds:` only: download a dataset not prepared yet.
        seed: int. Seeds the test share. Defaults to `42`.

    Returns:
        A `UserDataset`.

    Raises:
        ValueError, TypeError: an unknown prefix, bad arguments or bad
            data (each reader's docstring lists what it checks); the
            message names the argument or the file.

    Example:

    >>> data = resolve_user_dataset(  # doctest: +SKIP
    ...     "folder:my_images", image_size=(28, 28))
    >>> data.info.input_shape, data.class_names  # doctest: +SKIP
    ((28, 28, 1), ('cat', 'dog'))
    """
    kind, location = _parse_spec(spec)
    image_size = image_arrays.check_image_size(image_size)
    image_arrays.check_color_mode(color_mode)
    check_bool("download", download)
    if kind != "folder" and (test_dir is not None or test_share is not None):
        raise ValueError(
            "`test_dir` and `test_share` apply to folder: datasets only; "
            f"{kind}: data has its own test split. Received: "
            f"dataset={spec!r}, test_dir={test_dir!r}, "
            f"test_share={test_share!r}")
    if kind == "folder":
        arrays, test = _read_folder(location, image_size, color_mode,
                                    test_dir, test_share, seed)
    elif kind == "npz":
        arrays = npz_arrays.read_npz_arrays(
            location, image_size=image_size, color_mode=color_mode)
        test = {"source": "x_test"}
    else:
        from keras_caps.datasets.user_data import tfds_images

        arrays = tfds_images.read_tfds_images(
            location, image_size=image_size, color_mode=color_mode,
            data_dir=data_dir, download=download)
        test = {"source": "test split"}
    if len(arrays.class_names) < 2:
        raise ValueError(
            f"Received an invalid value for `dataset`: {spec} has "
            f"{len(arrays.class_names)} class; a classifier needs at least "
            "2.")
    return UserDataset(spec, arrays, test)


def _parse_spec(spec):
    if not is_user_dataset(spec):
        raise ValueError(
            "Received an invalid value for `dataset`, expected a name "
            f"starting with one of {list(SPEC_PREFIXES)} (folder:PATH, "
            "npz:PATH, tfds:NAME). Received: dataset="
            f"{spec!r}")
    kind, _, location = spec.partition(":")
    if kind != "tfds":
        location = os.path.expanduser(location)
    if not location:
        raise ValueError(
            f"Received an invalid value for `dataset`: nothing after "
            f"{kind + ':'!r}. Received: dataset={spec!r}")
    return kind, location


def _read_folder(path, image_size, color_mode, test_dir, test_share, seed):
    """The folder's `ImageArrays` with test data, and the test record."""
    arrays = image_folder.read_image_folder(path, image_size=image_size,
                                            color_mode=color_mode)
    if test_dir is not None:
        if test_share is not None:
            raise ValueError(
                "Pass `test_dir` or `test_share`, not both. Received: "
                f"test_dir={test_dir!r}, test_share={test_share!r}")
        source = arrays.source
        test = image_folder.read_image_folder(
            os.path.expanduser(os.fspath(test_dir)),
            image_size=tuple(source["image_size"]),
            color_mode=source["color_mode"],
            class_names=arrays.class_names, argument="test_dir")
        _check_test_images_unseen(arrays.train[0], test.train[0], path,
                                  test_dir)
        record = {"source": "test_dir",
                  "path": os.path.abspath(os.fspath(test_dir)),
                  "skipped_files": test.source["skipped_files"],
                  "fingerprint": test.source["fingerprint"]}
        return _with_test(arrays, test.train), record
    share = DEFAULT_TEST_SHARE if test_share is None else test_share
    share = check_number("test_share", share, 0.0, 1.0)
    if not 0.0 < share < 1.0:
        raise ValueError(
            "Received an invalid value for `test_share`, expected a "
            f"fraction strictly between 0 and 1. Received: test_share="
            f"{test_share!r}")
    images, labels = arrays.train
    train, held = holdout.holdout_indices(labels, seed, fraction=share)
    _check_test_share(labels, train, held, arrays.class_names, share)
    arrays = dataclasses.replace(arrays, train=(images[train],
                                                labels[train]))
    return (_with_test(arrays, (images[held], labels[held])),
            {"source": "test_share", "share": share, "seed": seed})


def _check_test_images_unseen(train_images, test_images, path, test_dir):
    """Refuses a test folder whose images are all training images (the
    training folder itself, or a copy), and warns about the test images
    that are also training images, pixel for pixel."""
    train = {hashlib.sha256(image.tobytes()).digest()
             for image in train_images}
    shared = sum(hashlib.sha256(image.tobytes()).digest() in train
                 for image in test_images)
    if shared and shared == len(test_images):
        raise ValueError(
            f"Received an invalid value for `test_dir`: all {shared} images "
            f"of {test_dir!r} are also training images of {path!r} (pixel "
            "for pixel), so the test accuracy would be measured on training "
            "images. Pass a folder of images the model does not train on, "
            "or leave out `test_dir` to hold out a share of the folder.")
    if shared:
        logging.warning(
            "%d of the %d test images of %s are also training images of %s "
            "(pixel for pixel): the test accuracy counts them.", shared,
            len(test_images), test_dir, path)


def _check_test_share(labels, train, held, class_names, share):
    counts = np.bincount(labels[train], minlength=len(class_names))
    starved = [name for name, count in zip(class_names, counts, strict=True)
               if count == 0]
    if starved or not len(held):
        raise ValueError(
            f"Too few images for a test share of {share}: "
            + (f"the classes {starved} keep no training image. "
               if starved else "no image is held out for testing. ")
            + "Add images, pass a test folder (`test_dir`, --test-dir) or "
            "change `test_share` (--test-share).")


def _with_test(arrays, test):
    return dataclasses.replace(arrays, test=test)


class UserDataset:
    """A user's dataset, decoded in memory, with the loaders' interface.

    Made by `resolve_user_dataset`. `load` yields batches in exactly the
    format of the built-in loaders (see `keras_caps.datasets.load`): raw
    pixels float32 in [0, 255], one-hot float32 labels, and with
    `reconstruction=True` the structure `({"image", "label"}, {"length",
    "reconstruction"})`.

    Attributes:
        spec: str. The spec it was read from (`"folder:PATH"`, ...).
        info: `DatasetInfo`: `input_shape` and `num_classes` for the model
            builders; `num_train` (the training data before the holdout),
            `num_validation` (the 10 % holdout), `num_test`.
        class_names: tuple of str, indexed by class id.
        arrays: the `ImageArrays` (uint8 images and int64 labels of the
            training and the test data).

    Example:

    >>> data = resolve_user_dataset("folder:my_images")  # doctest: +SKIP
    >>> model = keras_caps.applications.EfficientCapsNet(  # doctest: +SKIP
    ...     input_shape=data.info.input_shape,
    ...     num_classes=data.info.num_classes)
    >>> model.fit(data.load("train", batch_size=16),  # doctest: +SKIP
    ...           validation_data=data.load("validation", batch_size=16))
    """

    def __init__(self, spec, arrays, test_record):
        self.spec = spec
        self.arrays = arrays
        self.class_names = tuple(arrays.class_names)
        self._test_record = dict(test_record)
        images, labels = arrays.train
        num_train = len(labels)
        self.info = dataset_info.DatasetInfo(
            input_shape=tuple(int(size) for size in images.shape[1:]),
            num_classes=len(self.class_names), num_train=num_train,
            num_validation=int(np.floor(
                holdout.HOLDOUT_FRACTION * num_train + 0.5)),
            num_test=len(arrays.test[1]))

    def source_record(self):
        """A JSON-able dict of everything about the data that changes a
        result: the spec, the source (absolute path, or TFDS name, version
        and data directory), image size, colour mode, class names, the
        test data's origin, the sizes, skipped files and a content
        fingerprint (file count, bytes, SHA-256).

        Example:

        >>> data.source_record()["image_size"]  # doctest: +SKIP
        [28, 28]
        """
        height, width, channels = self.info.input_shape
        return {**self.arrays.source, "spec": self.spec,
                "image_size": [height, width],
                "color_mode": "grayscale" if channels == 1 else "rgb",
                "class_names": list(self.class_names),
                "test": dict(self._test_record),
                "num_train": self.info.num_train,
                "num_test": self.info.num_test}

    def load(self, split, *, batch_size, training=None, seed=42,
             validation="holdout", reconstruction=True,
             shuffle_buffer_size=None, augment=False):
        """Batches of one split, as `keras_caps.datasets.load` yields them.

        Splits: with `validation="holdout"` (default), `"train"` is the
        training data minus a seeded, class-stratified 10 % holdout
        (`holdout.holdout_indices`) and `"validation"` is the holdout; with
        `validation="test"`, `"train"` is all the training data and
        `"validation"` is the test data. `"test"` is the test data.

        Training (default for `"train"` only) shuffles with a buffer of the
        whole split, reshuffled every epoch, drops the last partial batch
        and, with `augment=True`, shifts each image by a random whole
        number of pixels, up to 10 % of its height and width
        (`image_shifts.random_image_shift`). Everything is a function of
        `seed`.

        Args:
            split: str. `"train"`, `"validation"` or `"test"`.
            batch_size: int. The global batch size.
            training: bool or None. Defaults to `split == "train"`.
            seed: int. Seeds the holdout, the shuffle and the shifts.
            validation: str. `"holdout"` or `"test"`.
            reconstruction: bool. Yield the dict structure with
                reconstruction targets. Defaults to `True`.
            shuffle_buffer_size: int or None. Defaults to the split size.
            augment: bool. Random shifts when training. Defaults to
                `False`.

        Returns:
            A `tf.data.Dataset` with known cardinality.

        Raises:
            ValueError: bad arguments, an empty split (too few images
                for a holdout), or a training split smaller than
                `batch_size`.
        """
        import tensorflow as tf

        from keras_caps.datasets import pipeline

        training = pipeline.check_arguments(split, batch_size, training,
                                            validation, seed,
                                            shuffle_buffer_size)
        check_bool("augment", augment)
        images, labels = holdout.select_split(
            {"train": self.arrays.train, "test": self.arrays.test}, split,
            validation, seed)
        if training and len(labels) < batch_size:
            raise ValueError(
                f"Received an invalid value for `batch_size`: the "
                f"{split!r} split of {self.spec} holds {len(labels)} "
                f"images, fewer than a batch, so training would see no "
                f"batch (the last partial batch is dropped). Pass a "
                f"batch_size of at most {len(labels)} (--batch-size). "
                f"Received: batch_size={batch_size}")
        if not len(labels) and (split == "test" or validation == "test"):
            raise ValueError(f"The test data of {self.spec} holds no images.")
        if not len(labels):
            raise ValueError(
                f"The {split!r} split of {self.spec} is empty: "
                f"{self.info.num_train} training images are too few for a "
                "10 % holdout (5 or more give one). Add images or pass "
                "validation='test' (--validation test).")
        dataset = tf.data.Dataset.from_tensor_slices((images, labels))
        return pipeline.build_pipeline(
            dataset,
            prepare=functools.partial(_one_hot,
                                      num_classes=self.info.num_classes),
            format_batch=functools.partial(_format_batch,
                                           reconstruction=reconstruction),
            batch_size=batch_size, training=training, seed=seed,
            shuffle_buffer_size=shuffle_buffer_size or len(labels),
            augment=_shift if augment else None)


def _one_hot(image, label, num_classes):
    import tensorflow as tf

    # The image stays uint8 in the cache: a quarter of float32's memory.
    return image, tf.one_hot(label, num_classes, dtype=tf.float32)


def _shift(batch, seed):
    import tensorflow as tf

    from keras_caps.datasets.user_data import image_shifts

    images, labels = batch
    images = tf.cast(images, tf.float32)
    return image_shifts.random_image_shift(images, seed), labels


def _format_batch(images, labels, reconstruction):
    import tensorflow as tf

    from keras_caps.datasets import pipeline

    return pipeline.classification_batch(tf.cast(images, tf.float32), labels,
                                         reconstruction)
