"""CIFAR-10 and CIFAR-100 in the recipe of Tsai et al. 2020.

"Capsules with Inverted Dot-Product Attention Routing" (ICLR 2020): the
augmentation and input normalisation of its official training script.
"""

import functools

import tensorflow as tf

from keras_caps.datasets import crops
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources
from keras_caps.datasets import tfds_splits

_NUM_CLASSES = {"cifar10": 10, "cifar100": 100}
_SIZE = 32
_PADDING = 4  # RandomCrop(32, padding=4)

# The per-channel statistics of the official training script
# (`main_capsule.py`), in [0, 1] units: mean and standard deviation.
# `InvertedAttentionCapsNet` stores them, in raw units, in its input layer.
CHANNEL_MEAN = (0.4914, 0.4822, 0.4465)
CHANNEL_STD = (0.2023, 0.1994, 0.2010)


def load_cifar10(split, *, batch_size, training=None, data_dir=None,
                 seed=42, validation="holdout", reconstruction=True,
                 shuffle_buffer_size=None, augment=True,
                 download=True):
    """CIFAR-10 batches: 32 x 32 x 3 raw pixels, one-hot labels of depth 10.

    See `load` for what is yielded, the augmentation and the splits
    (50,000 training images, holdout 5,000; 10,000 test images).

    Example:

    >>> ds = keras_caps.datasets.cifar.load_cifar10(  # doctest: +SKIP
    ...     "test", batch_size=100, reconstruction=False)
    >>> ds.element_spec[0].shape  # doctest: +SKIP
    TensorShape([None, 32, 32, 3])
    """
    return load("cifar10", split, batch_size=batch_size, training=training,
                data_dir=data_dir, seed=seed, validation=validation,
                reconstruction=reconstruction,
                shuffle_buffer_size=shuffle_buffer_size, augment=augment,
                download=download)


def load_cifar100(split, *, batch_size, training=None, data_dir=None,
                  seed=42, validation="holdout", reconstruction=True,
                  shuffle_buffer_size=None, augment=True,
                  download=True):
    """CIFAR-100 batches: 32 x 32 x 3 raw pixels, one-hot fine labels (100).

    See `load` for what is yielded, the augmentation and the splits
    (50,000 training images, holdout 5,000; 10,000 test images).

    Example:

    >>> ds = keras_caps.datasets.cifar.load_cifar100(  # doctest: +SKIP
    ...     "test", batch_size=100, reconstruction=False)
    >>> ds.element_spec[1].shape  # doctest: +SKIP
    TensorShape([None, 100])
    """
    return load("cifar100", split, batch_size=batch_size, training=training,
                data_dir=data_dir, seed=seed, validation=validation,
                reconstruction=reconstruction,
                shuffle_buffer_size=shuffle_buffer_size, augment=augment,
                download=download)


def load(dataset, split, *, batch_size, training=None, data_dir=None,
         seed=42, validation="holdout", reconstruction=True,
         shuffle_buffer_size=None, augment=True,
         download=True):
    """CIFAR batches for `InvertedAttentionCapsNet`.

    With `reconstruction=True` the dataset yields
    `({"image": image, "label": label},
      {"length": label, "reconstruction": target})`, otherwise
    `(image, label)`:

    - `image`: float32 `(batch, 32, 32, 3)` in **raw pixel units**
      ([0, 255]). The per-channel normalisation of the official recipe
      (mean `CHANNEL_MEAN`, std `CHANNEL_STD`, in [0, 1] units) lives in
      the model, in its `"input_scaling"` Normalization layer, so exported
      models serve raw images.
    - `label`: float32 one-hot `(batch, 10)` (CIFAR-10) or `(batch, 100)`
      (CIFAR-100, the fine labels).
    - `target`: float32 `(batch, 32, 32, 3)`, `clip(image / 255, 0, 1)`.

    Training (default for `"train"` only) reshuffles every epoch with a
    buffer of the whole split and augments each image as the official code
    does (`RandomCrop(32, padding=4)` then `RandomHorizontalFlip()`): the
    image is zero-padded by 4 pixels on each side (black, before the
    normalisation, as torchvision pads) and a random 32 x 32 crop is taken,
    then it is mirrored left-right with probability 1/2. Evaluation images
    are unchanged.

    Splits: with `validation="holdout"` (default), `"train"` is
    the 50,000 training images minus a seeded, class-stratified holdout of
    5,000 (45,000), and `"validation"` is that holdout. With
    `validation="test"` (official), `"train"` is all 50,000 and
    `"validation"` is the test split. `"test"` is always the 10,000 test
    images.

    Data: the TFDS `cifar10` / `cifar100` in the TFDS data directory
    `data_dir` (or `$KERAS_CAPS_DATA_DIR`, or the TFDS default), downloaded
    and prepared there on first use unless `download=False`.

    Args:
        dataset: str. `"cifar10"` or `"cifar100"`.
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
        augment: bool. Crop and flip when training. Defaults to `True`.
        download: bool. Let TFDS download and prepare a dataset that is
            not prepared yet (see `keras_caps.datasets.sources.load_tfds`).
            Defaults to `True`; `False` reads prepared data only.

    Returns:
        A `tf.data.Dataset` with known cardinality.
    """
    if dataset not in _NUM_CLASSES:
        raise ValueError(
            f"Unknown `dataset`. Expected one of {sorted(_NUM_CLASSES)}. "
            f"Received: dataset={dataset!r}")
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    if not isinstance(augment, bool):
        raise TypeError(
            "Received an invalid type for `augment`, expected a bool. "
            f"Received: augment={augment!r}")
    data_dir = sources.resolve_data_dir(data_dir)
    examples, num_examples = tfds_splits.load_split(
        dataset, split, validation=validation, seed=seed, data_dir=data_dir,
        download=download, as_supervised=True)
    return pipeline.build_pipeline(
        examples,
        prepare=functools.partial(_prepare,
                                  num_classes=_NUM_CLASSES[dataset]),
        format_batch=functools.partial(pipeline.classification_batch,
                                       reconstruction=reconstruction),
        batch_size=batch_size, training=training, seed=seed,
        shuffle_buffer_size=shuffle_buffer_size or max(num_examples, 1),
        augment=_augment if augment else None)


def _prepare(image, label, num_classes):
    image = tf.cast(image, tf.float32)  # (32, 32, 3), raw units
    return image, tf.one_hot(label, num_classes, dtype=tf.float32)


def _augment(batch, seed):
    images, labels = batch  # images (batch, 32, 32, 3), raw units
    batch_size = tf.shape(images)[0]
    crop_seed, flip_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=2))
    padded = tf.pad(images, [[0, 0], [_PADDING, _PADDING],
                             [_PADDING, _PADDING], [0, 0]])
    images = crops.random_crop(padded, _SIZE, crop_seed)
    flip = tf.random.stateless_uniform([batch_size, 1, 1, 1], flip_seed) < 0.5
    images = tf.where(flip, tf.reverse(images, axis=[2]), images)
    return images, labels
