"""Inputs next to their reconstructions from the predicted capsule."""

import math

import numpy as np

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _figures
from keras_caps.visualization import _inputs


@keras_caps_export("keras_caps.visualization.reconstructions")
def reconstructions(model, images):
    """The predicted classes and reconstructions of `images`, as arrays.

    Runs `keras_caps.applications.inference_model(model,
    reconstruction=True)`: the decoder reads the longest class capsule, as
    at test time.

    Args:
        model: A capsule-network application model with layers named
            `"digit_caps"`, `"length"`, `"mask"` and `"decoder"` (e.g. from
            `EfficientCapsNet` or `CapsNet`).
        images: Raw images (0-255), one example or a batch.

    Returns:
        `(predicted, reconstructed)`: int class indices `(batch,)` and
        float32 reconstructions in [0, 1], of shape `(batch, height, width,
        channels)`. For several objects per image (MultiMNIST) the
        reconstructions of the objects are added and clipped to [0, 1].
    """
    from keras_caps.applications import inference_model

    images = _inputs.as_batch(model, images)
    outputs = inference_model(model, reconstruction=True)(images,
                                                          training=False)
    lengths = _inputs.to_numpy(outputs[roles.LENGTH])
    reconstructed = _inputs.to_numpy(outputs[roles.RECONSTRUCTION])
    if reconstructed.ndim == images.ndim + 1:  # (batch, objects, ...)
        reconstructed = np.clip(reconstructed.sum(axis=1), 0.0, 1.0)
    return np.argmax(lengths, axis=-1), reconstructed


@keras_caps_export("keras_caps.visualization.plot_reconstructions")
def plot_reconstructions(model, images, labels=None, images_per_row=10):
    """Draws inputs next to their reconstructions from the predicted capsule.

    Each input (top) is shown above the image the decoder reconstructs
    from the longest class capsule (below), as in Figure 3 of Sabour et
    al. (2017); the title is the predicted class, in red with the true
    class when it is wrong. Pixels are shown in [0, 1]: inputs divided by
    255, reconstructions as decoded (see `reconstructions`).

    Args:
        model: A capsule-network application model, see `reconstructions`.
        images: Raw images (0-255), `(batch, height, width, channels)`.
        labels: Optional true classes, int `(batch,)` or one-hot
            `(batch, num_classes)`. Defaults to `None`.
        images_per_row: int. Inputs per row of pairs. Defaults to `10`.

    Returns:
        A `matplotlib.figure.Figure` with one axes per image; the axes of
        input `k` are `figure.axes[2 * k]`, its reconstruction
        `figure.axes[2 * k + 1]`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> figure = keras_caps.visualization.plot_reconstructions(
    ...     model, np.zeros((4, 28, 28, 1)))
    >>> len(figure.axes)
    8
    >>> figure.savefig("reconstructions.png")  # doctest: +SKIP

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829), Figure 3.
    """
    _figures.require_matplotlib()
    images = _inputs.as_batch(model, images)
    predicted, reconstructed = reconstructions(model, images)
    true_classes = _true_classes(labels, len(images))
    columns = min(images_per_row, len(images))
    rows = math.ceil(len(images) / columns)
    figure = _figures.new_figure(1.0 * columns + 0.6, 2.1 * rows + 0.2)
    grid = figure.add_gridspec(2 * rows, columns)
    for index, image in enumerate(images):
        row, column = divmod(index, columns)
        top = figure.add_subplot(grid[2 * row, column])
        _figures.show_image(top, image / 255.0)
        bottom = figure.add_subplot(grid[2 * row + 1, column])
        _figures.show_image(bottom, reconstructed[index])
        title = str(predicted[index])
        color = "black"
        if true_classes is not None and true_classes[index] != predicted[
                index]:
            title = f"{predicted[index]} (true {true_classes[index]})"
            color = "tab:red"
        top.set_title(title, fontsize=9, color=color)
        if column == 0:
            top.set_ylabel("input", fontsize=8)
            bottom.set_ylabel("reconstruction", fontsize=8)
    return figure


def _true_classes(labels, num_images):
    if labels is None:
        return None
    labels = np.asarray(labels)
    if labels.ndim == 2:
        labels = np.argmax(labels, axis=-1)
    if labels.shape != (num_images,):
        raise ValueError(
            "`labels` must hold one class (int or one-hot) per image, "
            f"{num_images} in all. Received: labels.shape={labels.shape}")
    return labels.astype("int64")
