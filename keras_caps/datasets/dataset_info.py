"""What each dataset looks like to a model: the `DATASETS` presets."""

import dataclasses


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

    Example:

    >>> keras_caps.datasets.DATASETS["mnist"].input_shape
    (28, 28, 1)
    """

    input_shape: tuple
    num_classes: int
    num_train: int
    num_validation: int
    num_test: int


DATASETS = {
    "mnist": DatasetInfo(input_shape=(28, 28, 1), num_classes=10,
                         num_train=60000, num_validation=6000,
                         num_test=10000),
    # Generated: MNIST digits on a 40 x 40 canvas (`mnist_canvas.load`).
    "mnist_canvas": DatasetInfo(input_shape=(40, 40, 1), num_classes=10,
                                num_train=60000, num_validation=6000,
                                num_test=10000),
    "fashion_mnist": DatasetInfo(input_shape=(28, 28, 1), num_classes=10,
                                 num_train=60000, num_validation=6000,
                                 num_test=10000),
    "smallnorb": DatasetInfo(input_shape=(48, 48, 2), num_classes=5,
                             num_train=24300, num_validation=2430,
                             num_test=24300),
    "multi_mnist": DatasetInfo(input_shape=(36, 36, 1), num_classes=10,
                               num_train=60000, num_validation=6000,
                               num_test=10000),
    "cifar10": DatasetInfo(input_shape=(32, 32, 3), num_classes=10,
                           num_train=50000, num_validation=5000,
                           num_test=10000),
    "cifar100": DatasetInfo(input_shape=(32, 32, 3), num_classes=100,
                            num_train=50000, num_validation=5000,
                            num_test=10000),
}
