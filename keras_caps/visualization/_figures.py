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
