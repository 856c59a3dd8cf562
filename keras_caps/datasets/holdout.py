"""The seeded, class-stratified validation holdout.

The official training scripts of Efficient-CapsNet and of Tsai et al. 2020
keep the checkpoint with the best test accuracy, so their test numbers are
optimistic. The loaders select models on a held-out 10 % of the training
data instead (`validation="holdout"`, the default), and keep the official
protocol as `validation="test"`.
"""

import numpy as np

HOLDOUT_FRACTION = 0.1


def holdout_indices(labels, seed, fraction=HOLDOUT_FRACTION):
    """Splits example indices into a training part and a stratified holdout.

    The holdout holds `round(fraction * num_examples)` examples (6,000 of
    MNIST's 60,000; 2,430 of smallNORB's 24,300). Each class contributes
    `fraction` of its examples, rounded by the largest-remainder method so
    the total is exact; the examples of a class are drawn without
    replacement by a NumPy generator seeded with `seed`, so the split is the
    same on every machine and every call with the same seed.

    Args:
        labels: 1-D integer array of class labels, in the stored example
            order.
        seed: int. The seed of the draw.
        fraction: float. The held-out fraction. Defaults to `0.1`.

    Returns:
        Tuple `(train_indices, holdout_indices)`: sorted int64 arrays that
        partition `range(len(labels))`.

    Example:

    >>> train, held = holdout_indices(np.repeat(np.arange(2), 10), seed=0)
    >>> len(train), len(held)
    (18, 2)
    """
    labels = np.asarray(labels).reshape(-1)
    num_examples = len(labels)
    num_holdout = int(np.floor(fraction * num_examples + 0.5))
    classes, counts = np.unique(labels, return_counts=True)
    quotas = fraction * counts
    per_class = np.floor(quotas).astype("int64")
    leftover = num_holdout - int(per_class.sum())
    # Largest remainders first; ties go to the smaller class label.
    order = np.argsort(-(quotas - per_class), kind="stable")
    per_class[order[:leftover]] += 1
    rng = np.random.default_rng(seed)
    held = [rng.choice(np.flatnonzero(labels == label), size=int(count),
                       replace=False)
            for label, count in zip(classes, per_class, strict=True)]
    held = np.sort(np.concatenate(held + [np.zeros(0, "int64")]))
    is_train = np.ones(num_examples, dtype=bool)
    is_train[held] = False
    return np.flatnonzero(is_train).astype("int64"), held.astype("int64")


def select_split(arrays, split, validation, seed):
    """The examples of one split under a validation protocol.

    Args:
        arrays: dict `{"train": (images, labels), "test": (images, labels)}`
            of the official splits.
        split: str. `"train"`, `"validation"` or `"test"`.
        validation: str. `"holdout"`: `"train"` is the official training
            split minus a stratified 10 % holdout and `"validation"` is the
            holdout. `"test"` (the official protocol): `"train"` is the whole
            training split and `"validation"` is the test split.
        seed: int. The seed of the holdout draw.

    Returns:
        Tuple `(images, labels)` of the split.
    """
    if split == "test" or (split == "validation" and validation == "test"):
        return arrays["test"]
    images, labels = arrays["train"]
    if validation == "test":
        return images, labels
    train, held = holdout_indices(labels, seed)
    chosen = train if split == "train" else held
    return images[chosen], labels[chosen]
