"""The `(inputs, targets)` structure of a single-label batch, written once
for both executors (`numpy_ops`, `tf_data_ops`)."""

from keras_caps import model_roles as roles


def classification_batch(images, labels, reconstruction, ops):
    """The `(inputs, targets)` structure of a single-label batch.

    Args:
        images: float32 `(batch, height, width, channels)`, raw pixels.
        labels: float32 one-hot `(batch, num_classes)`.
        reconstruction: bool.
        ops: the executor (`numpy_ops` or `tf_data_ops`).

    Returns:
        With `reconstruction`, `({"image": images, "label": labels},
        {"length": labels, "reconstruction": clip(images / 255, 0, 1)})`,
        keyed by the models' input and output names; otherwise
        `(images, labels)`.

    Example:

    >>> from keras_caps.datasets import numpy_ops
    >>> images = np.full((2, 4, 4, 1), 510.0, np.float32)
    >>> inputs, targets = classification_batch(
    ...     images, np.eye(2, dtype=np.float32), True, numpy_ops)
    >>> float(targets["reconstruction"].max()), sorted(inputs)
    (1.0, ['image', 'label'])
    """
    if not reconstruction:
        return images, labels
    target = ops.clip(images / 255.0, 0.0, 1.0)
    return ({roles.IMAGE: images, roles.LABEL: labels},
            {roles.LENGTH: labels, roles.RECONSTRUCTION: target})
