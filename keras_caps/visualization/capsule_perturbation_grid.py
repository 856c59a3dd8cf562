"""Decoding a class capsule with one dimension tweaked at a time."""

import keras
import numpy as np

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _figures
from keras_caps.visualization import _inputs

# Sabour et al. (2017), Figure 4: -0.25 to 0.25 in steps of 0.05.
PAPER_OFFSETS = tuple(round(0.05 * step, 2) for step in range(-5, 6))


@keras_caps_export("keras_caps.visualization.capsule_perturbations")
def capsule_perturbations(model, image, class_index=None,
                          offsets=PAPER_OFFSETS, dimensions=None):
    """Decodes a class capsule with each dimension swept over `offsets`.

    Uses the model's own layers: the output of `"digit_caps"` for `image`,
    with `offsets[c]` added to dimension `dimensions[r]` of the capsule of
    `class_index` (one change at a time), masked by that class with the
    model's `"mask"` layer (given the one-hot class, as in training) and
    decoded by its `"decoder"`:

    ```
    capsules        = digit_caps(image)               # (classes, dim)
    capsules[k, d] += offsets[c]                      # k = class_index
    decoded[r, c]   = decoder(mask([capsules, one_hot(k)]))
    ```

    Args:
        model: A capsule-network application model with layers named
            `"digit_caps"`, `"length"`, `"mask"` (one object per image)
            and `"decoder"` (e.g. from `EfficientCapsNet`).
        image: One raw image (0-255), `(height, width, channels)`, or a
            batch holding one image.
        class_index: int. The class capsule to perturb. Defaults to `None`:
            the predicted class (the longest capsule).
        offsets: Sequence of floats added to each dimension. Defaults to
            `PAPER_OFFSETS`, -0.25 to 0.25 in steps of 0.05.
        dimensions: Sequence of capsule dimensions to sweep. Defaults to
            `None`: all of them.

    Returns:
        `(decoded, class_index)`: float32 images `(len(dimensions),
        len(offsets), height, width, channels)` and the class perturbed.
    """
    _check_layers(model)
    image = _inputs.as_batch(model, image, name="image")
    if image.shape[0] != 1:
        raise ValueError(
            "`image` must be one image (or a batch of one). Received: "
            f"image.shape={image.shape}")
    capsules_and_lengths = keras.Model(
        _inputs.image_input(model),
        (model.get_layer(roles.CLASS_CAPSULES).output,  # (b, classes, dim)
         model.get_layer(roles.LENGTH).output))  # (batch, classes)
    capsules, lengths = (_inputs.to_numpy(x) for x in capsules_and_lengths(
        image, training=False))
    num_classes, capsule_dim = capsules.shape[1:]
    if class_index is None:
        class_index = int(np.argmax(lengths[0]))
    class_index = _check_index("class_index", class_index, num_classes)
    if dimensions is None:
        dimensions = range(capsule_dim)
    dimensions = [_check_index("dimensions", dimension, capsule_dim)
                  for dimension in dimensions]
    offsets = np.asarray(offsets, dtype="float32").reshape(-1)
    if not dimensions or not offsets.size:
        raise ValueError(
            "`dimensions` and `offsets` must not be empty. Received: "
            f"dimensions={dimensions}, offsets={offsets.tolist()}")

    # (rows, columns, classes, dim): one changed entry per grid cell.
    deltas = np.zeros((len(dimensions), offsets.size, num_classes,
                       capsule_dim), dtype="float32")
    for row, dimension in enumerate(dimensions):
        deltas[row, :, class_index, dimension] = offsets
    perturbed = (capsules + deltas).reshape(-1, num_classes, capsule_dim)
    labels = np.zeros((len(perturbed), num_classes), dtype="float32")
    labels[:, class_index] = 1.0
    # `training=True` makes the mask use the given class, not the longest
    # capsule; the decoder runs in inference mode.
    masked = model.get_layer(roles.MASK)([perturbed, labels], training=True)
    decoded = _inputs.to_numpy(
        model.get_layer(roles.DECODER)(masked, training=False))
    return (decoded.reshape(len(dimensions), offsets.size,
                            *decoded.shape[1:]), class_index)


@keras_caps_export("keras_caps.visualization.plot_capsule_perturbations")
def plot_capsule_perturbations(model, image, class_index=None,
                               offsets=PAPER_OFFSETS, dimensions=None):
    """Draws what each dimension of a class capsule encodes.

    A grid with one row per capsule dimension and one column per offset:
    the decoder's image of the capsule of `class_index` with `offset` added
    to that dimension, as in Figure 4 of Sabour et al. (2017). The middle
    column (offset 0) is the plain reconstruction. See
    `capsule_perturbations` for how the images are computed.

    Args:
        model: A capsule-network application model, see
            `capsule_perturbations`.
        image: One raw image (0-255).
        class_index: int. Defaults to `None`: the predicted class.
        offsets: Sequence of floats. Defaults to `PAPER_OFFSETS`
            (-0.25 to 0.25 in steps of 0.05).
        dimensions: Sequence of ints. Defaults to `None`: all dimensions.

    Returns:
        A `matplotlib.figure.Figure` whose axes are the grid, row after
        row: `figure.axes[r * len(offsets) + c]` shows dimension
        `dimensions[r]` shifted by `offsets[c]`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> figure = keras_caps.visualization.plot_capsule_perturbations(
    ...     model, np.zeros((28, 28, 1)), dimensions=[0, 1])
    >>> len(figure.axes)  # 2 dimensions x 11 offsets
    22

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829), Figure 4.
    """
    _figures.require_matplotlib()
    decoded, class_index = capsule_perturbations(
        model, image, class_index=class_index, offsets=offsets,
        dimensions=dimensions)
    if dimensions is None:
        dimensions = range(decoded.shape[0])
    offsets = np.asarray(offsets, dtype="float32").reshape(-1)
    rows, columns = decoded.shape[:2]
    figure = _figures.new_figure(0.55 * columns + 0.6, 0.55 * rows + 0.7,
                                 layout=None)
    axes = figure.subplots(rows, columns, squeeze=False)
    figure.subplots_adjust(left=0.6 / (0.55 * columns + 0.6), right=0.99,
                           bottom=0.01, top=1 - 0.55 / (0.55 * rows + 0.7),
                           wspace=0.04, hspace=0.04)
    for row, dimension in enumerate(dimensions):
        for column, offset in enumerate(offsets):
            cell = axes[row, column]
            _figures.show_image(cell, decoded[row, column])
            if row == 0:
                cell.set_title(f"{offset:+.2f}", fontsize=7)
            if column == 0:
                cell.set_ylabel(f"dim {dimension}", fontsize=7)
    figure.suptitle(f"Class {class_index} capsule: each dimension shifted "
                    "by the offset above", fontsize=9)
    return figure


def _check_layers(model):
    _inputs.image_input(model)
    roles.require_roles(
        model, (roles.CLASS_CAPSULES, roles.LENGTH, roles.MASK, roles.DECODER),
        "Capsule perturbations")
    num_masks = getattr(model.get_layer(roles.MASK), "num_masks", None)
    if num_masks is not None:
        raise ValueError(
            "Capsule perturbations decode one object per image, but the "
            f"model's `{roles.MASK}` layer selects {num_masks} (a "
            f"MultiMNIST model). Received: a mask with num_masks={num_masks}")


def _check_index(name, value, size):
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
            or not 0 <= value < size):
        raise ValueError(
            f"Received an invalid value for `{name}`, expected an integer "
            f"in [0, {size}). Received: {name}={value!r}")
    return int(value)
