"""MNIST in the Efficient-CapsNet recipe (Mazzia et al. 2021)."""

import functools

import tensorflow as tf

from keras_caps.datasets import augmentation as augmentations
from keras_caps.datasets import crops
from keras_caps.datasets import holdout
from keras_caps.datasets import pipeline
from keras_caps.datasets import sources
from keras_caps.datasets.dataset_info import MNIST_AUGMENTATIONS
from keras_caps.validation import check_choice

_NUM_CLASSES = 10
_SIZE = 28
_MAX_SHIFT = 2


def load(split, *, batch_size, training=None, data_dir=None, seed=42,
         validation="holdout", reconstruction=True, shuffle_buffer_size=None,
         augment=True, augmentation="efficient_capsnet", download=True):
    """MNIST batches for Efficient-CapsNet (and, with a shift, CapsNet).

    With `reconstruction=True` the dataset yields
    `({"image": image, "label": label},
      {"length": label, "reconstruction": target})`, otherwise
    `(image, label)`:

    - `image`: float32 `(batch, 28, 28, 1)`, **raw pixels in [0, 255]**
      (the model scales them itself).
    - `label`: float32 one-hot `(batch, 10)`.
    - `target`: float32 `(batch, 28, 28, 1)`, the (augmented) image / 255,
      in [0, 1].

    Splits: with `validation="holdout"` (default), `"train"` is
    the 60,000 training digits minus a seeded, class-stratified holdout of
    6,000 (54,000), and `"validation"` is that holdout. With
    `validation="test"` (the official protocol), `"train"` is all 60,000
    digits and `"validation"` is the test split. `"test"` is always the
    10,000 test digits.

    When training (default for `"train"` only), examples are shuffled with a
    buffer of the whole split, reshuffled every epoch, augmented as the
    official Efficient-CapsNet code does (see
    `keras_caps.datasets.augmentation`), and the last partial
    batch is dropped. Everything is a function of `seed`. With
    `augmentation="shift"` training uses the original CapsNet's only
    augmentation instead (Sabour et al.): each image is translated by
    integer shifts uniform in [-2, 2] per axis, with zero fill.

    Data: the four IDX files from `data_dir` (or `$KERAS_CAPS_DATA_DIR`);
    otherwise the TFDS `mnist`, downloaded on first use unless
    `download=False`.

    Args:
        split: str. `"train"`, `"validation"` or `"test"`.
        batch_size: int. The global batch size.
        training: bool or `None`. Shuffle, augment and drop the remainder.
            Defaults to `split == "train"`.
        data_dir: str or `None`. Folder of the IDX files (or with an
            `mnist/` subfolder holding them).
        seed: int. Seeds the holdout, the shuffle and the augmentation.
            Defaults to `42`.
        validation: str. `"holdout"` or `"test"`. Defaults to `"holdout"`.
        reconstruction: bool. Yield the dict structure with reconstruction
            targets. Defaults to `True`.
        shuffle_buffer_size: int or `None`. Defaults to the split size.
        augment: bool. Augment when training. Defaults to `True`.
        augmentation: str. What `augment` applies: `"efficient_capsnet"`
            (rotate, shift, squish, erase; see
            `keras_caps.datasets.augmentation`) or `"shift"` (random shifts
            of up to 2 pixels, CapsNet). Defaults to `"efficient_capsnet"`.
        download: bool. Let TFDS download and prepare a dataset that is
            not prepared yet (see `keras_caps.datasets.sources.load_tfds`).
            Defaults to `True`; `False` reads prepared data only.

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> ds = keras_caps.datasets.mnist.load(  # doctest: +SKIP
    ...     "train", batch_size=16, data_dir="/data/mnist")
    >>> ds.element_spec[0]["image"].shape  # doctest: +SKIP
    TensorShape([16, 28, 28, 1])
    """
    return load_mnist_format(
        "mnist", split, batch_size=batch_size, training=training,
        data_dir=data_dir, seed=seed, validation=validation,
        reconstruction=reconstruction,
        shuffle_buffer_size=shuffle_buffer_size, augment=augment,
        augmentation=augmentation, download=download)


def load_mnist_format(dataset, split, *, batch_size, training=None,
                      data_dir=None, seed=42, validation="holdout",
                      reconstruction=True, shuffle_buffer_size=None,
                      augment=True, augmentation="efficient_capsnet",
                      download=True):
    """`load` for any 28 x 28, 10-class dataset in MNIST's IDX format.

    Args:
        dataset: str. `"mnist"` or `"fashion_mnist"`: the TFDS name and the
            subfolder looked for under `data_dir`.
        split, batch_size, training, data_dir, seed, validation,
        reconstruction, shuffle_buffer_size, augment, augmentation,
        download: As in `load`.

    Returns:
        The `tf.data.Dataset` described in `load`.
    """
    training = pipeline.check_arguments(split, batch_size, training,
                                        validation, seed,
                                        shuffle_buffer_size)
    check_choice("augmentation", augmentation, MNIST_AUGMENTATIONS)
    arrays = sources.load_image_arrays(dataset, data_dir, download)
    images, labels = holdout.select_split(arrays, split, validation, seed)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return pipeline.build_pipeline(
        dataset, prepare=_prepare,
        format_batch=functools.partial(pipeline.classification_batch,
                                       reconstruction=reconstruction),
        batch_size=batch_size, training=training, seed=seed,
        shuffle_buffer_size=shuffle_buffer_size or max(len(labels), 1),
        augment=_AUGMENT_FUNCTIONS[augmentation] if augment else None)


def _prepare(image, label):
    image = tf.cast(tf.reshape(image, (28, 28, 1)), tf.float32)
    return image, tf.one_hot(label, _NUM_CLASSES, dtype=tf.float32)


def _augment(batch, seed):
    images, labels = batch
    return augmentations.augment_mnist(images, seed), labels


def _shift(batch, seed):
    images, labels = batch
    return random_shift(images, seed), labels


_AUGMENT_FUNCTIONS = {"efficient_capsnet": _augment, "shift": _shift}


def random_shift(images, seed, max_shift=_MAX_SHIFT):
    """Translates each image by integer shifts in [-max_shift, max_shift].

    The shift of each axis is drawn uniformly per image from stateless ops;
    pixels that leave the frame are dropped and zeros come in (the official
    `train_2shifted_mnist` records hold every such shift of each digit).

    Args:
        images: float32 tensor `(batch, 28, 28, channels)`.
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.
        max_shift: int. Largest shift per axis. Defaults to `2`.

    Returns:
        float32 tensor of the same shape.
    """
    images = tf.convert_to_tensor(images, dtype=tf.float32)
    seed = tf.convert_to_tensor(seed, dtype_hint=tf.int64)
    padded = tf.pad(images, [[0, 0], [max_shift, max_shift],
                             [max_shift, max_shift], [0, 0]])
    # A window at offset o of the padded image moves the content by
    # max_shift - o pixels.
    return crops.random_crop(padded, _SIZE, seed)
