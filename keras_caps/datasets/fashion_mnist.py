"""Fashion-MNIST through the MNIST pipeline."""

from keras_caps.datasets import mnist


def load(split, *, batch_size, training=None, data_dir=None, seed=42,
         validation="holdout", reconstruction=True, shuffle_buffer_size=None,
         augment=True, augmentation="efficient_capsnet", download=True):
    """Fashion-MNIST batches, in exactly the structure of MNIST's.

    Yields what `keras_caps.datasets.mnist.load` yields: with
    `reconstruction=True`, `({"image": image, "label": label},
    {"length": label, "reconstruction": image / 255})`, otherwise
    `(image, label)`; images float32 `(batch, 28, 28, 1)` raw pixels in
    [0, 255], labels one-hot float32 `(batch, 10)`. Holdout 6,000 of the
    60,000 training images (class-stratified); test 10,000.

    Efficient-CapsNet has no official Fashion-MNIST recipe; training uses
    the MNIST augmentation (`augmentation`, as in MNIST) unless
    `augment=False`.

    Data: the four IDX files (same names as MNIST's) from
    `<data_dir>/fashion_mnist/` when that folder exists, else from
    `data_dir` itself (or `$KERAS_CAPS_DATA_DIR`); otherwise the TFDS
    `fashion_mnist`, downloaded on first use unless `download=False`.
    Beware: a data folder holding MNIST's files would be read as
    Fashion-MNIST; keep the two in `mnist/` and `fashion_mnist/` subfolders
    of one data folder.

    Args:
        split, batch_size, training, data_dir, seed, validation,
        reconstruction, shuffle_buffer_size, augment, augmentation,
        download: As in `keras_caps.datasets.mnist.load`.

    Returns:
        A `tf.data.Dataset` with known cardinality.

    Example:

    >>> ds = keras_caps.datasets.fashion_mnist.load(  # doctest: +SKIP
    ...     "test", batch_size=32, reconstruction=False)
    >>> ds.element_spec[1].shape  # doctest: +SKIP
    TensorShape([None, 10])
    """
    return mnist.load_mnist_format(
        "fashion_mnist", split, batch_size=batch_size, training=training,
        data_dir=data_dir, seed=seed, validation=validation,
        reconstruction=reconstruction,
        shuffle_buffer_size=shuffle_buffer_size, augment=augment,
        augmentation=augmentation, download=download)
