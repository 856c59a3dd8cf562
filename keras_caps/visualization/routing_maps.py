"""Coupling coefficients of routing layers as heatmaps."""

import keras
import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.diagnostics.router_search import find_routers
from keras_caps.visualization import _figures
from keras_caps.visualization import _inputs


@keras_caps_export("keras_caps.visualization.routing_layer_names")
def routing_layer_names(model):
    """Names of the routing layers (`keras_caps.layers.Router`) of `model`.

    Every router returns its coupling coefficients in one layout; the
    signed credit of `VectorRouting` is drawn by `plot_credit_overlays`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> keras_caps.visualization.routing_layer_names(model)
    ['digit_caps']
    """
    _inputs.image_input(model)
    return [layer.name
            for layer in find_routers(model, top_level_only=True)]


@keras_caps_export("keras_caps.visualization.routing_couplings")
def routing_couplings(model, inputs, layer_name=None, position=None):
    """The coupling coefficients of a routing layer for one input.

    Runs `model` up to the layer and asks the layer for the couplings of
    its last routing pass (`routing_trace`) on what it receives; nothing
    of the routing is recomputed here.

    Args:
        model: A `keras.Model` holding the routing layer.
        inputs: One example for the model's (image) input, or a batch of
            one; raw pixels for the applications.
        layer_name: str. The routing layer. Defaults to `None`: the last
            one in `routing_layer_names(model)`.
        position: For a convolutional routing (one whose
            `couplings_grid` is not `None`, as
            `InvertedAttentionRouting` with `kernel_size`), the output
            position `(row, column)` whose window is shown. Defaults to
            `None`: the middle position.

    Returns:
        float32 array `(num_parents, num_children)`: column `i` holds the
        couplings of child capsule `i` (for a convolutional routing,
        children are the window's capsules in `(row, column, type)` order;
        for several heads, the mean of the heads' couplings).
    """
    layer = _routing_layer(model, layer_name)
    inputs = _inputs.as_batch(model, inputs, name="inputs")
    if inputs.shape[0] != 1:
        raise ValueError(
            "`inputs` must be one example (or a batch of one). Received: "
            f"inputs.shape={inputs.shape}")
    children = keras.Model(_inputs.image_input(model), layer.input)(
        inputs, training=False)
    # The trace's couplings are in the `Router` layout.
    couplings = layer.routing_trace(children)["couplings"][-1]
    # (heads, children, parents): the heads' mean, parents down.
    couplings = np.mean(_inputs.to_numpy(couplings)[0].astype("float32"),
                        axis=0).T
    grid = layer.couplings_grid(tuple(children.shape))
    if grid is None:
        return couplings
    rows, columns = grid
    if position is None:
        position = (rows // 2, columns // 2)
    row, column = _check_position(position, rows, columns)
    # (parents, positions, window children): the position's block.
    blocks = couplings.reshape(couplings.shape[0], rows * columns, -1)
    return blocks[:, row * columns + column]


@keras_caps_export("keras_caps.visualization.plot_routing_maps")
def plot_routing_maps(model, inputs, layer_names=None, position=None):
    """Draws the coupling coefficients of routing layers for one input.

    One heatmap per routing layer, parents (output capsules, e.g. classes)
    down and children (input capsules) across, so each column shows how a
    child splits its vote between the parents; for `FCCaps` and
    `DynamicRouting` every column sums to 1. The data are those of
    `routing_couplings`.

    Args:
        model: A `keras.Model` with routing layers, e.g. from
            `EfficientCapsNet` (layer `"digit_caps"`).
        inputs: One example (raw pixels for the applications).
        layer_names: list of str. Defaults to `None`: every layer in
            `routing_layer_names(model)`.
        position: Output position of convolutional routings, see
            `routing_couplings`.

    Returns:
        A `matplotlib.figure.Figure` with one heatmap axes per layer,
        in `layer_names` order, each followed by its colour bar axes.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> figure = keras_caps.visualization.plot_routing_maps(
    ...     model, np.zeros((28, 28, 1)))
    >>> figure.axes[0].images[0].get_array().shape  # 10 parents, 16 children
    (10, 16)
    """
    _figures.require_matplotlib()
    if layer_names is None:
        layer_names = routing_layer_names(model)
    if isinstance(layer_names, str):
        layer_names = [layer_names]
    if not layer_names:
        raise ValueError(
            "`plot_routing_maps` found no routing layer (a `Router`) in "
            "the model. Received: a model with layers"
            f" {[layer.name for layer in model.layers]}")
    maps = [routing_couplings(model, inputs, name, position)
            for name in layer_names]
    widest = max(couplings.shape[1] for couplings in maps)
    width = min(12.0, max(4.5, 0.3 * widest + 1.8))
    heights = [min(4.0, max(1.6, 0.28 * couplings.shape[0] + 0.9))
               for couplings in maps]
    figure = _figures.new_figure(width, sum(heights))
    grid = figure.add_gridspec(len(maps), 1, height_ratios=heights)
    for index, name in enumerate(layer_names):
        couplings = maps[index]
        axes = figure.add_subplot(grid[index])
        image = axes.imshow(couplings, aspect="auto", cmap="viridis",
                            vmin=0.0, vmax=max(float(couplings.max()), 1e-6),
                            interpolation="nearest")
        num_parents, num_children = couplings.shape
        axes.set_title(f"{name}: {num_children} children -> {num_parents} "
                       "parents", fontsize=9)
        axes.set_xlabel("child capsule", fontsize=8)
        axes.set_ylabel("parent capsule", fontsize=8)
        if num_parents <= 32:
            axes.set_yticks(range(num_parents))
        axes.tick_params(labelsize=7)
        colorbar = figure.colorbar(image, ax=axes, pad=0.01)
        colorbar.set_label("coupling", fontsize=8)
        colorbar.ax.tick_params(labelsize=7)
    return figure


def _routing_layer(model, layer_name):
    names = routing_layer_names(model)
    if layer_name is None:
        if not names:
            raise ValueError(
                "The model has no routing layer (a `Router`). Received: a "
                "model with layers "
                f"{[layer.name for layer in model.layers]}")
        layer_name = names[-1]
    if layer_name not in names:
        raise ValueError(
            f"Unknown routing layer. Expected one of {names}. Received: "
            f"layer_name={layer_name!r}")
    return model.get_layer(layer_name)


def _check_position(position, rows, columns):
    valid = (isinstance(position, (tuple, list)) and len(position) == 2
             and all(isinstance(v, (int, np.integer))
                     and not isinstance(v, bool) for v in position)
             and 0 <= position[0] < rows and 0 <= position[1] < columns)
    if not valid:
        raise ValueError(
            "Received an invalid value for `position`, expected (row, "
            f"column) inside the {rows}x{columns} output map. Received: "
            f"position={position!r}")
    return int(position[0]), int(position[1])
