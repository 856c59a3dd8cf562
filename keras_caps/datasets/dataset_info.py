"""What each built-in dataset is: the `DATASETS` descriptions.

One description per dataset: its shapes and split sizes, where its files
come from (a subfolder of IDX files, a TFDS name), the augmentations its
training split takes and whether the TensorFlow-free NumPy pipeline runs
it. The loaders, the data records and the command line read them from
here.
"""

import dataclasses

# The augmentations of the MNIST-format datasets: Efficient-CapsNet's
# (rotate, shift, squish, erase; `augmentation_steps`) and CapsNet's
# random shifts of up to 2 pixels.
MNIST_AUGMENTATIONS = ("efficient_capsnet", "shift")


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset, as its loader yields it.

    Args:
        input_shape: tuple. Shape of one yielded image.
        num_classes: int. Depth of the one-hot labels.
        num_train: int. Examples (for MultiMNIST: digits) in the whole
            official training split. Under `validation="holdout"` the
            `"train"` split holds `num_train - num_validation`.
        num_validation: int. Size of the class-stratified holdout carved out
            of the training split under `validation="holdout"` (10 %).
        num_test: int. Examples (for MultiMNIST: base digits; the test set
            has `num_test * partners_per_digit` pairs) in the test split.
        tfds_name: str. The TFDS dataset read without a data folder (its
            source data: `"mnist"` for the datasets generated from MNIST).
        idx_folder: str or `None`. The subfolder of a data folder holding
            the four MNIST-format IDX files it reads (the folder itself
            when there is no such subfolder); `None`: read through TFDS
            only.
        augmentations: tuple of str. What the loader's `augmentation`
            option takes for training images (empty: the loader's own, or
            none).
        numpy_pipeline: bool. Whether the TensorFlow-free NumPy pipeline
            runs it (`input_pipeline="numpy"`).

    Example:

    >>> keras_caps.datasets.DATASETS["mnist"].input_shape
    (28, 28, 1)
    >>> keras_caps.datasets.DATASETS["multi_mnist"].tfds_name
    'mnist'
    """

    input_shape: tuple
    num_classes: int
    num_train: int
    num_validation: int
    num_test: int
    tfds_name: str = ""
    idx_folder: str | None = None
    augmentations: tuple = ()
    numpy_pipeline: bool = False


DATASETS = {
    "mnist": DatasetInfo(input_shape=(28, 28, 1), num_classes=10,
                         num_train=60000, num_validation=6000,
                         num_test=10000, tfds_name="mnist",
                         idx_folder="mnist",
                         augmentations=MNIST_AUGMENTATIONS,
                         numpy_pipeline=True),
    # Generated: MNIST digits on a 40 x 40 canvas (`mnist_canvas.load`).
    "mnist_canvas": DatasetInfo(input_shape=(40, 40, 1), num_classes=10,
                                num_train=60000, num_validation=6000,
                                num_test=10000, tfds_name="mnist",
                                idx_folder="mnist"),
    "fashion_mnist": DatasetInfo(input_shape=(28, 28, 1), num_classes=10,
                                 num_train=60000, num_validation=6000,
                                 num_test=10000, tfds_name="fashion_mnist",
                                 idx_folder="fashion_mnist",
                                 augmentations=MNIST_AUGMENTATIONS,
                                 numpy_pipeline=True),
    "smallnorb": DatasetInfo(input_shape=(48, 48, 2), num_classes=5,
                             num_train=24300, num_validation=2430,
                             num_test=24300, tfds_name="smallnorb"),
    # Generated: pairs of MNIST digits (`multi_mnist_pairs`).
    "multi_mnist": DatasetInfo(input_shape=(36, 36, 1), num_classes=10,
                               num_train=60000, num_validation=6000,
                               num_test=10000, tfds_name="mnist",
                               idx_folder="mnist", numpy_pipeline=True),
    "cifar10": DatasetInfo(input_shape=(32, 32, 3), num_classes=10,
                           num_train=50000, num_validation=5000,
                           num_test=10000, tfds_name="cifar10"),
    "cifar100": DatasetInfo(input_shape=(32, 32, 3), num_classes=100,
                            num_train=50000, num_validation=5000,
                            num_test=10000, tfds_name="cifar100"),
}
