"""Matplotlib, imported only when a figure is drawn, and shared drawing code.

matplotlib is an optional extra (`pip install "keras-caps[plot]"`): nothing
here imports it at module level, so `import keras_caps` (and
`import keras_caps.visualization`) work without it.
"""

import numpy as np

INSTALL_HINT = 'pip install "keras-caps[plot]"'


def require_matplotlib():
    """Imports matplotlib, or says how to install it."""
    try:
        import matplotlib
        from matplotlib import figure  # noqa: F401
        from matplotlib.backends import backend_agg  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "keras_caps.visualization draws its figures with matplotlib, "
            "which is not installed. Install it with: "
            f"{INSTALL_HINT}") from error
    return matplotlib


def new_figure(width, height, layout="constrained"):
    """A `matplotlib.figure.Figure` drawn by the non-interactive Agg canvas.

    The figure is not registered with `pyplot`, so it never opens a window
    and is freed with its last reference; it still displays in notebooks
    and saves with `figure.savefig(path)`.
    """
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout=layout)
    FigureCanvasAgg(figure)
    return figure


# Ten colours (matplotlib's "tab10"), then the same colours dashed,
# dotted and dash-dotted: 40 series told apart before a style repeats.
_SERIES_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_SERIES_LINESTYLES = ("-", "--", ":", "-.")


def series_style(index):
    """The colour and line style of the `index`-th line of a plot, so that
    more lines than colours stay distinguishable.

    Example:

    >>> series_style(0)
    {'color': '#1f77b4', 'linestyle': '-'}
    >>> series_style(10)
    {'color': '#1f77b4', 'linestyle': '--'}
    """
    colors, styles = _SERIES_COLORS, _SERIES_LINESTYLES
    return {"color": colors[index % len(colors)],
            "linestyle": styles[index // len(colors) % len(styles)]}


#: Inches a figure widens by for the legend `legend_beside` puts right of
#: its panels.
LEGEND_WIDTH = 1.8


def legend_beside(figure, axes):
    """One legend for the whole figure, right of its panels (so it hides
    no line), from `axes`' labelled lines; make the figure `LEGEND_WIDTH`
    wider for it."""
    handles, labels = axes.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside right upper",
                      fontsize="small")


def display_image(image):
    """`(height, width, channels)` values in [0, 1] as imshow takes them.

    One channel is shown in grey, three as RGB, any other number by its
    first channel (e.g. the left view of smallNORB's stereo pairs).
    """
    image = np.asarray(image, dtype="float32")
    if image.ndim == 3 and image.shape[-1] == 3:
        return np.clip(image, 0.0, 1.0)
    if image.ndim == 3:
        image = image[..., 0]
    return image


def show_image(axes, image):
    """Draws an image with values in [0, 1], without ticks."""
    axes.imshow(display_image(image), cmap="gray", vmin=0.0, vmax=1.0,
                interpolation="nearest")
    hide_ticks(axes)


def hide_ticks(axes):
    axes.set_xticks([])
    axes.set_yticks([])
    for spine in axes.spines.values():
        spine.set_visible(False)
