"""Credit of each image position for a class, drawn over the image."""

import math

import numpy as np

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _figures
from keras_caps.visualization import _inputs


@keras_caps_export("keras_caps.visualization.credit_maps")
def credit_maps(model, images, class_index=None, grid_shape=None):
    """End-to-end credit of each feature-map position for one class.

    Uses `keras_caps.applications.credit_model(model)`, whose credit (the
    composed credit assignments of the model's chain of `VectorRouting`
    layers) has one row per input of the first routing: for image models
    the positions of the last feature map, row by row.

    Args:
        model: A `keras.Model` whose `VectorRouting` layers were called with
            `return_credit=True`, e.g. from
            `VectorRoutingCapsNet`.
        images: Raw images (0-255), one example or a batch.
        class_index: int. The class whose credit is returned. Defaults to
            `None`: each image's predicted class (the largest output).
        grid_shape: `(rows, columns)` of the feature map. Defaults to
            `None`: the factorisation of the number of positions closest to
            the image's aspect ratio (7 x 7 for 49 positions).

    Returns:
        `(maps, classes)`: float32 credit `(batch, rows, columns)` (unit
        standard deviation per example over all positions and classes;
        positive credit supports the class) and the int classes
        `(batch,)` they are for.
    """
    from keras_caps.applications import credit_model

    images = _inputs.as_batch(model, images)
    outputs, credit = credit_model(model)(images, training=False)
    if isinstance(outputs, dict):
        outputs = outputs.get(roles.LENGTH, next(iter(outputs.values())))
    scores = _inputs.to_numpy(outputs).reshape(len(images), -1)
    credit = _inputs.to_numpy(credit)  # (batch, positions, classes)
    num_positions, num_classes = credit.shape[1:]
    if class_index is None:
        classes = np.argmax(scores, axis=-1)
    else:
        if (isinstance(class_index, bool)
                or not isinstance(class_index, (int, np.integer))
                or not 0 <= class_index < num_classes):
            raise ValueError(
                "Received an invalid value for `class_index`, expected an "
                f"integer in [0, {num_classes}). Received: "
                f"class_index={class_index!r}")
        classes = np.full(len(images), int(class_index))
    if grid_shape is None:
        grid_shape = _grid_shape(num_positions, images.shape[1:3])
    rows, columns = grid_shape
    if rows * columns != num_positions:
        raise ValueError(
            f"`grid_shape` must hold the {num_positions} positions of the "
            f"first routing. Received: grid_shape={tuple(grid_shape)}")
    maps = credit[np.arange(len(images)), :, classes]  # (batch, positions)
    return maps.reshape(len(images), rows, columns), classes


@keras_caps_export("keras_caps.visualization.plot_credit_overlays")
def plot_credit_overlays(model, images, class_index=None, grid_shape=None,
                         images_per_row=5):
    """Draws the credit of each image position for a class over the image.

    Each image is shown in grey with its credit map (`credit_maps`)
    stretched over it, each feature-map position covering its share of the
    image: red positions support the class, blue ones count against it.
    The colour scale is symmetric around zero and shared by all panels.

    Args:
        model: A model with `VectorRouting` layers, see `credit_maps`.
        images: Raw images (0-255), `(batch, height, width, channels)`.
        class_index: int. Defaults to `None`: each image's predicted class.
        grid_shape: `(rows, columns)`, see `credit_maps`.
        images_per_row: int. Defaults to `5`.

    Returns:
        A `matplotlib.figure.Figure`; `figure.axes[k]` shows image `k`
        (`images[0]` the image, `images[1]` the credit map), the last axes
        is the colour bar.

    Example:

    >>> model = keras_caps.applications.VectorRoutingCapsNet("mnist")
    >>> figure = keras_caps.visualization.plot_credit_overlays(
    ...     model, np.zeros((2, 28, 28, 1)))
    >>> figure.axes[0].images[1].get_array().shape
    (7, 7)

    Reference:
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754)
    """
    _figures.require_matplotlib()
    images = _inputs.as_batch(model, images)
    maps, classes = credit_maps(model, images, class_index=class_index,
                                grid_shape=grid_shape)
    columns = min(images_per_row, len(images))
    rows = math.ceil(len(images) / columns)
    figure = _figures.new_figure(1.6 * columns + 0.9, 1.75 * rows + 0.1)
    limit = max(float(np.abs(maps).max()), 1e-6)
    height, width = images.shape[1:3]
    overlay = None
    for index, (image, credit) in enumerate(zip(images, maps, strict=True)):
        axes = figure.add_subplot(rows, columns, index + 1)
        _figures.show_image(axes, image / 255.0)
        overlay = axes.imshow(credit, cmap="coolwarm", vmin=-limit,
                              vmax=limit, alpha=0.6,
                              extent=(-0.5, width - 0.5, height - 0.5, -0.5),
                              interpolation="nearest")
        axes.set_title(f"credit for {classes[index]}", fontsize=8)
    colorbar = figure.colorbar(overlay, ax=figure.axes, shrink=0.8)
    colorbar.set_label("credit", fontsize=8)
    colorbar.ax.tick_params(labelsize=7)
    return figure


def _grid_shape(num_positions, image_size):
    """The factor pair of `num_positions` closest to the image's shape."""
    aspect = image_size[0] / image_size[1]
    pairs = [(rows, num_positions // rows)
             for rows in range(1, num_positions + 1)
             if num_positions % rows == 0]
    return min(pairs, key=lambda pair: abs(math.log(pair[0] / pair[1])
                                           - math.log(aspect)))
