"""smallNORB in the Efficient-CapsNet recipe (Mazzia et al. 2021), or
prepared as for matrix capsules with EM routing (Hinton et al. 2018)."""

import functools
import logging

import numpy as np
import tensorflow as tf

from keras_caps.datasets import crops
from keras_caps.datasets import holdout
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources
from keras_caps.datasets import tfds_splits
from keras_caps.datasets import viewpoints as viewpoints_lib

_TFDS_NAME = "smallnorb"
_NUM_CLASSES = 5
_SCALE = 64  # config.json: scale_smallnorb
_PATCH = 48  # config.json: patch_smallnorb
_CENTER = (_SCALE - _PATCH) // 2
_MAX_DELTA = 2.0  # in standardised units, i.e. training standard deviations
_CONTRAST_RANGE = (0.5, 1.5)
_BATCH = 512
_IMAGE_KEYS = ("image", "image2")
# Matrix capsules with EM routing (Hinton, Sabour & Frosst 2018, §5): one
# view at 48 x 48, 32 x 32 crops.
PRESETS = ("efficient_capsnet", "matrix_capsules")
_MATRIX_SCALE = 48
_MATRIX_PATCH = 32
_MATRIX_CENTER = (_MATRIX_SCALE - _MATRIX_PATCH) // 2
_MATRIX_MAX_DELTA = 32.0  # raw pixel units (of 255); the paper gives none


def load(split, *, batch_size, training=None, data_dir=None, seed=42,
         validation="holdout", reconstruction=True, shuffle_buffer_size=None,
         augment=True, statistics=None, download=True,
         preset="efficient_capsnet", viewpoints=None):
    """smallNORB stereo batches for Efficient-CapsNet, or single views for
    matrix capsules (`preset="matrix_capsules"`).

    With `reconstruction=True` the dataset yields
    `({"image": image, "label": label},
      {"length": label, "reconstruction": target})`, otherwise
    `(image, label)`:

    - `image`: float32 `(batch, 48, 48, 2)`, the two 96 x 96 views
      (`image`, `image2`) as channels, resized bilinearly to 64 x 64 and
      cropped to 48 x 48, in **raw pixel units**. The model standardises
      them with a `Normalization` layer set from `training_statistics`.
    - `label`: float32 one-hot `(batch, 5)` of `label_category`.
    - `target`: float32 `(batch, 48, 48, 2)`, `clip(image / 255, 0, 1)`.

    Evaluation crops the centre (offset 8). Training (default for
    `"train"` only) reshuffles every epoch with a buffer of the whole split
    (the official code never reshuffles its fixed array), and augments per
    image as the official code does (`utils/pre_process_smallnorb.py`): a
    random 48 x 48 crop, a random brightness delta uniform in
    [-2, 2] standardised units, i.e. `2.0 * std` per channel in raw units
    with `std` from `training_statistics`, and a random contrast factor in
    [0.5, 1.5] about each image's per-channel mean. Like the official
    augmentation this is not clipped, so training images can leave
    [0, 255]; only the reconstruction target is clipped to [0, 1].

    With `preset="matrix_capsules"` (Hinton, Sabour & Frosst 2018, §5):
    one view (`image`), resized bilinearly from 96 x 96 to 48 x 48, so
    `image` and `target` are `(batch, 32, 32, 1)`: evaluation takes the
    centre 32 x 32 crop (offset 8); training a random 32 x 32 crop, a
    random brightness delta uniform in [-32, 32] raw units and a random
    contrast factor in [0.5, 1.5] about each image's mean (the paper gives
    no values: ours), clipped to [0, 255]. The paper standardises each
    image; `MatrixCapsNet` does that in the model, after the jitter, so
    the jitter reaches the model only where the clipping saturates pixels
    (a shift and a scaling about the mean are otherwise undone).
    `statistics` is not used.

    Splits: with `validation="holdout"` (default), `"train"` is
    the 24,300 training pairs minus a seeded, class-stratified holdout of
    2,430 (21,870), and `"validation"` is that holdout. With
    `validation="test"` (official), `"train"` is all 24,300 and
    `"validation"` is the test split. `"test"` is always the 24,300 test
    pairs.

    With `viewpoints="azimuth"` or `"elevation"`, the novel-viewpoint
    protocol of Hinton, Sabour & Frosst 2018, §5.1 (see
    `keras_caps.datasets.viewpoints`): `"train"` holds only the training
    images seen from the familiar viewpoints (azimuths 300, 320, 340, 0,
    20 and 40 degrees; or the elevations 30, 35 and 40 degrees): 8,100,
    minus a seeded, class-stratified holdout of 810 drawn from them under
    `validation="holdout"` (7,290), and `"validation"` is that holdout of
    familiar viewpoints. Two more splits hold the test images (other
    object instances) apart by viewpoint: `"test_familiar"`, the 8,100
    seen from the familiar viewpoints, and `"test_novel"`, the 16,200
    seen from the others; `"test"` is still the whole test split. Under
    `validation="test"`, `"train"` is all 8,100 familiar training images
    and `"validation"` is `"test_familiar"`. The statistics of the
    brightness jitter come from the familiar training images.

    Data: the TFDS `smallnorb` in the TFDS data directory `data_dir` (or
    `$KERAS_CAPS_DATA_DIR`, or the TFDS default), downloaded and prepared
    there on first use unless `download=False`.

    Args:
        split: str. `"train"`, `"validation"` or `"test"`.
        batch_size: int. The global batch size.
        training: bool or `None`. Shuffle, augment and drop the remainder.
            Defaults to `split == "train"`.
        data_dir: str or `None`. TFDS data directory.
        seed: int. Seeds the holdout, the shuffle and the augmentation.
            Defaults to `42`.
        validation: str. `"holdout"` or `"test"`. Defaults to `"holdout"`.
        reconstruction: bool. Defaults to `True`.
        shuffle_buffer_size: int or `None`. Defaults to the split size.
        augment: bool. Augment when training; without it training uses
            the centre crop. Defaults to `True`.
        statistics: `None` or the `(mean, variance)` of
            `training_statistics`, to scale the brightness delta. Computed
            (one pass over the training images) when needed and `None`.
        download: bool. Let TFDS download and prepare a dataset that is
            not prepared yet (see `keras_caps.datasets.sources.load_tfds`).
            Defaults to `True`; `False` reads prepared data only.
        preset: str. `"efficient_capsnet"` (the default, above) or
            `"matrix_capsules"`.
        viewpoints: `None` (default), `"azimuth"` or `"elevation"`: the
            novel-viewpoint splits above; `split` may then also be
            `"test_familiar"` or `"test_novel"`.

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> ds = keras_caps.datasets.smallnorb.load(  # doctest: +SKIP
    ...     "test", batch_size=16)
    >>> ds.element_spec[0]["image"].shape  # doctest: +SKIP
    TensorShape([None, 48, 48, 2])
    """
    _check_viewpoint_split(split, viewpoints)
    training = pipeline.check_arguments(
        "test" if split in viewpoints_lib.TEST_SPLITS else split,
        batch_size, training, validation, seed, shuffle_buffer_size)
    if preset not in PRESETS:
        raise ValueError(
            "Received an invalid value for `preset`, expected one of "
            f"{list(PRESETS)}. Received: preset={preset!r}")
    data_dir = sources.resolve_data_dir(data_dir)
    examples, num_examples = _split_examples(split, validation, seed,
                                             data_dir, download, viewpoints)
    random_crop = training and augment
    augment_fn = None
    if preset == "matrix_capsules":
        return pipeline.build_pipeline(
            examples,
            prepare=functools.partial(_prepare_view,
                                      center_crop=not random_crop),
            format_batch=functools.partial(pipeline.classification_batch,
                                           reconstruction=reconstruction),
            batch_size=batch_size, training=training, seed=seed,
            shuffle_buffer_size=shuffle_buffer_size or max(num_examples, 1),
            augment=_augment_view if random_crop else None)
    if random_crop:
        if statistics is None:
            statistics = training_statistics(data_dir, seed, validation,
                                             download, viewpoints)
        _, variance = statistics
        std = np.sqrt(np.asarray(variance, "float32"))
        augment_fn = functools.partial(_augment, std=tf.constant(std))
    return pipeline.build_pipeline(
        examples,
        prepare=functools.partial(_prepare, center_crop=not random_crop),
        format_batch=functools.partial(pipeline.classification_batch,
                                       reconstruction=reconstruction),
        batch_size=batch_size, training=training, seed=seed,
        shuffle_buffer_size=shuffle_buffer_size or max(num_examples, 1),
        augment=augment_fn)


def training_statistics(data_dir=None, seed=42, validation="holdout",
                        download=True, viewpoints=None):
    """Per-channel mean and variance of the training images, raw units.

    The statistics come from the images the model trains on (the training
    split minus the holdout under `validation="holdout"`, the whole
    training split under `"test"`), over all pixels of the original
    96 x 96 views, as the official standardisation does. They are applied
    unchanged to validation and test data, where the official code
    standardises the test set with its own statistics. Set a model's input
    `keras.layers.Normalization(mean=mean, variance=variance)` from them.

    Args:
        data_dir: str or `None`. TFDS data directory.
        seed: int. The holdout seed. Defaults to `42`.
        validation: str. `"holdout"` or `"test"`. Defaults to `"holdout"`.
        download: bool. Let TFDS download and prepare a dataset that is
            not prepared yet (see `keras_caps.datasets.sources.load_tfds`).
            Defaults to `True`; `False` reads prepared data only.
        viewpoints: `None`, `"azimuth"` or `"elevation"`: over the
            training images of the familiar viewpoints only (see `load`).

    Returns:
        Tuple `(mean, variance)`, float32 NumPy arrays of shape `(2,)`, in
        raw pixel units (0-255 scale).

    Example:

    >>> from keras_caps.datasets import smallnorb
    >>> mean, variance = smallnorb.training_statistics()  # doctest: +SKIP
    >>> normalize = keras.layers.Normalization(  # doctest: +SKIP
    ...     mean=mean, variance=variance)
    """
    pipeline.check_arguments("train", 1, None, validation, seed, None)
    viewpoints_lib.check_viewpoints(_TFDS_NAME, viewpoints)
    data_dir = sources.resolve_data_dir(data_dir)
    examples, _ = _split_examples("train", validation, seed, data_dir,
                                  download, viewpoints)
    zeros = tf.zeros((2,), tf.float64)

    def add(totals, images):
        count, total, total_squares = totals
        images = tf.reshape(tf.cast(images, tf.float64), (-1, 2))
        return (count + tf.cast(tf.shape(images)[0], tf.float64),
                total + tf.reduce_sum(images, axis=0),
                total_squares + tf.reduce_sum(tf.square(images), axis=0))

    images = examples.map(_stereo_pair, num_parallel_calls=tf.data.AUTOTUNE)
    count, total, total_squares = images.batch(_BATCH).reduce(
        (tf.constant(0.0, tf.float64), zeros, zeros), add)
    count = max(float(count), 1.0)
    mean = total.numpy() / count
    variance = np.maximum(total_squares.numpy() / count - mean**2, 0.0)
    logging.info("smallNORB training statistics over %d pixels per channel: "
                 "mean %s, variance %s.", int(count), mean, variance)
    return mean.astype("float32"), variance.astype("float32")


def familiar_test_images(viewpoints, data_dir=None, download=True):
    """Which test images are seen from the familiar viewpoints.

    Args:
        viewpoints: str. `"azimuth"` or `"elevation"` (see `load`).
        data_dir: str or `None`. TFDS data directory.
        download: bool. Let TFDS download and prepare the dataset.

    Returns:
        bool NumPy array `(24300,)`, in the order `load("test")` yields
        the test images: `True` for the images of `"test_familiar"`,
        `False` for those of `"test_novel"`.

    Example:

    >>> familiar = familiar_test_images("azimuth")  # doctest: +SKIP
    >>> int(familiar.sum()), int((~familiar).sum())  # doctest: +SKIP
    (8100, 16200)
    """
    viewpoints_lib.check_viewpoints(_TFDS_NAME, viewpoints)
    if viewpoints is None:
        raise ValueError(
            "Received an invalid value for `viewpoints`, expected "
            "'azimuth' or 'elevation'. Received: viewpoints=None")
    data_dir = sources.resolve_data_dir(data_dir)
    return viewpoints_lib.familiar_mask(viewpoints, _read_labels(
        "test", viewpoints_lib.VIEWPOINT_FEATURES[viewpoints], data_dir,
        download))


def _split_examples(split, validation, seed, data_dir, download,
                    viewpoints=None):
    """The examples (feature dicts) of a split and their number."""
    if viewpoints is None or split == "test":
        return tfds_splits.load_split(
            _TFDS_NAME, split, validation=validation, seed=seed,
            data_dir=data_dir, download=download,
            label_key="label_category", image_keys=_IMAGE_KEYS)
    if split == "validation" and validation == "test":
        split = "test_familiar"  # Test-as-validation: familiar views.
    tfds_split = "test" if split in viewpoints_lib.TEST_SPLITS else "train"
    examples = sources.load_tfds(_TFDS_NAME, tfds_split, data_dir, download)
    familiar = viewpoints_lib.familiar_mask(viewpoints, _read_labels(
        tfds_split, viewpoints_lib.VIEWPOINT_FEATURES[viewpoints], data_dir,
        download))
    if split == "test_novel":
        chosen = np.flatnonzero(~familiar)
    elif split == "test_familiar" or validation == "test":
        chosen = np.flatnonzero(familiar)
    else:  # The holdout is drawn from the familiar training images.
        positions = np.flatnonzero(familiar)
        categories = _read_labels("train", "label_category", data_dir,
                                  download)
        train, held = holdout.holdout_indices(categories[positions], seed)
        chosen = positions[train if split == "train" else held]
    return tfds_splits.select_examples(examples, chosen, len(familiar))


def _read_labels(tfds_split, feature, data_dir, download):
    return tfds_splits.read_labels(
        _TFDS_NAME, tfds_split, data_dir=data_dir, download=download,
        label_key=feature, image_keys=_IMAGE_KEYS)


def _check_viewpoint_split(split, viewpoints):
    """Refuses an unknown `viewpoints`, and the viewpoint test splits
    without `viewpoints`."""
    viewpoints_lib.check_viewpoints(_TFDS_NAME, viewpoints)
    if split in viewpoints_lib.TEST_SPLITS and viewpoints is None:
        raise ValueError(
            f"Received an invalid value for `split`: {split!r} holds the "
            "test images of the familiar or novel viewpoints of a "
            "viewpoint split, which needs `viewpoints` ('azimuth' or "
            f"'elevation'). Received: split={split!r}, viewpoints=None")


def _stereo_pair(example):
    return tf.concat([example["image"], example["image2"]], axis=-1)


def _prepare(example, center_crop):
    image = tf.cast(_stereo_pair(example), tf.float32)  # (96, 96, 2)
    image = tf.image.resize(image, (_SCALE, _SCALE), method="bilinear")
    if center_crop:
        image = image[_CENTER:_CENTER + _PATCH, _CENTER:_CENTER + _PATCH]
    label = tf.one_hot(example["label_category"], _NUM_CLASSES,
                       dtype=tf.float32)
    return image, label


def _augment(batch, seed, std):
    images, labels = batch  # images (batch, 64, 64, 2), raw units
    batch_size = tf.shape(images)[0]
    crop_seed, brightness_seed, contrast_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=3))
    images = crops.random_crop(images, _PATCH, crop_seed)
    # tf.image.random_brightness(max_delta=2.0) in standardised units,
    # i.e. delta * std per channel in raw units.
    delta = tf.random.stateless_uniform(
        [batch_size, 1, 1, 1], brightness_seed, -_MAX_DELTA, _MAX_DELTA)
    images = images + delta * std
    # tf.image.random_contrast(0.5, 1.5): about each channel's mean.
    factor = tf.random.stateless_uniform(
        [batch_size, 1, 1, 1], contrast_seed, *_CONTRAST_RANGE)
    mean = tf.reduce_mean(images, axis=(1, 2), keepdims=True)
    return (images - mean) * factor + mean, labels


def _prepare_view(example, center_crop):
    """One view at 48 x 48 (Hinton et al. 2018, §5), centre-cropped to
    32 x 32 for evaluation."""
    image = tf.cast(example["image"], tf.float32)  # (96, 96, 1)
    image = tf.image.resize(image, (_MATRIX_SCALE, _MATRIX_SCALE),
                            method="bilinear")
    if center_crop:
        image = image[_MATRIX_CENTER:_MATRIX_CENTER + _MATRIX_PATCH,
                      _MATRIX_CENTER:_MATRIX_CENTER + _MATRIX_PATCH]
    label = tf.one_hot(example["label_category"], _NUM_CLASSES,
                       dtype=tf.float32)
    return image, label


def _augment_view(batch, seed):
    """Random 32 x 32 crops with brightness and contrast jitter."""
    images, labels = batch  # images (batch, 48, 48, 1), raw units
    batch_size = tf.shape(images)[0]
    crop_seed, brightness_seed, contrast_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=3))
    images = crops.random_crop(images, _MATRIX_PATCH, crop_seed)
    delta = tf.random.stateless_uniform(
        [batch_size, 1, 1, 1], brightness_seed, -_MATRIX_MAX_DELTA,
        _MATRIX_MAX_DELTA)
    factor = tf.random.stateless_uniform(
        [batch_size, 1, 1, 1], contrast_seed, *_CONTRAST_RANGE)
    mean = tf.reduce_mean(images, axis=(1, 2), keepdims=True)
    images = (images - mean) * factor + mean + delta
    return tf.clip_by_value(images, 0.0, 255.0), labels
