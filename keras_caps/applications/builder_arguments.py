"""Argument checks that several application builders share."""

from keras_caps.validation import check_bool
from keras_caps.validation import check_positive_int


def resolve_num_classes(num_classes, preset, minimum=1):
    """`num_classes`, or the preset's when `None`; at least `minimum`."""
    if num_classes is None:
        return preset["num_classes"]
    num_classes = check_positive_int("num_classes", num_classes)
    if num_classes < minimum:
        raise ValueError(
            "Received an invalid value for `num_classes`, expected an "
            f"integer of at least {minimum}. Received: "
            f"num_classes={num_classes}")
    return num_classes


def reject_reconstruction(builder_name, reconstruction):
    """Raises for `reconstruction=True` on a model without a decoder."""
    if check_bool("reconstruction", reconstruction):
        raise ValueError(
            f"`{builder_name}` has no decoder, so it cannot train with a "
            "reconstruction loss. Pass `reconstruction=False` (with "
            "`keras-caps train`, `--no-reconstruction`). Received: "
            "reconstruction=True")
