"""Loss and accuracy per epoch from the training command's CSV log."""

import csv
import os

import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _figures


@keras_caps_export("keras_caps.visualization.read_training_log")
def read_training_log(path):
    """Reads a Keras `CSVLogger` file, such as `keras-caps train`'s.

    Args:
        path: str. The CSV file (`history.csv` in a run's output folder).

    Returns:
        dict mapping each column name to a float64 array, one value per
        epoch (empty cells are NaN).

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: the file is not a CSV log of numbers (binary data, a
            row with another number of fields than the header, a cell that
            is not a number), or holds no epochs; the message names the
            file, and the line and column at fault.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No training log at {path!r}. `keras-caps train` writes "
            "`history.csv` in its output folder.")
    try:
        with open(path, newline="") as file:
            rows = list(csv.reader(file))
    except (UnicodeDecodeError, csv.Error) as error:
        raise ValueError(
            f"The training log {path!r} is not a CSV text file ({error}). "
            "Expected the `history.csv` of `keras-caps train`.") from None
    rows = [row for row in rows if row]
    if len(rows) < 2:
        raise ValueError(
            f"The training log {path!r} holds no epochs. Received: a file "
            "with a header only, or an empty file")
    header, rows = rows[0], rows[1:]
    columns = {name: [] for name in header}
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ValueError(
                f"The training log {path!r} is not a CSV log of numbers: "
                f"line {line} has {len(row)} fields and the header "
                f"{len(header)}. Received: {','.join(row)[:80]!r}")
        for name, text in zip(header, row, strict=True):
            try:
                columns[name].append(float(text) if text.strip() else
                                     float("nan"))
            except ValueError:
                raise ValueError(
                    f"The training log {path!r} is not a CSV log of "
                    f"numbers: line {line}, column {name!r} holds "
                    f"{text[:40]!r}. Expected the `history.csv` of "
                    "`keras-caps train`.") from None
    return {name: np.array(values) for name, values in columns.items()}


@keras_caps_export("keras_caps.visualization.plot_training_curves")
def plot_training_curves(log, metrics=None):
    """Draws training and validation curves, one panel per metric.

    Args:
        log: A path to a CSV log (see `read_training_log`), or a dict of
            per-epoch values such as `history.history` from `model.fit`.
        metrics: list of str, metric names without the `val_` prefix.
            Defaults to `None`: `"loss"` and every metric whose name
            contains `"accuracy"`.

    Returns:
        A `matplotlib.figure.Figure` with one axes per metric; in each,
        the first line is the training metric and the second (when the log
        has it) the validation metric, against the epoch (1-based).

    Example:

    >>> figure = keras_caps.visualization.plot_training_curves(
    ...     {"loss": [0.5, 0.3], "val_loss": [0.4, 0.35]})
    >>> figure.axes[0].lines[1].get_ydata().tolist()
    [0.4, 0.35]
    """
    _figures.require_matplotlib()
    if isinstance(log, (str, os.PathLike)):
        log = read_training_log(log)
    log = {name: np.asarray(values, dtype="float64")
           for name, values in log.items()}
    names = [name for name in log
             if not name.startswith("val_") and name != "epoch"]
    if metrics is None:
        metrics = [name for name in names if name == "loss"]
        metrics += [name for name in names if "accuracy" in name]
    if isinstance(metrics, str):
        metrics = [metrics]
    missing = [name for name in metrics if name not in log]
    if not metrics or missing:
        raise ValueError(
            f"The log has no metric {missing or metrics}. Expected some of "
            f"{names}. Received: metrics={metrics!r}")
    empty = [name for name in metrics if not np.isfinite(log[name]).any()]
    if empty:
        raise ValueError(
            f"The log has no finite value for {empty}: nothing to draw. "
            f"Received: a log with {len(log[empty[0]])} epochs")
    num_epochs = len(log[metrics[0]])
    epochs = (log["epoch"] + 1 if "epoch" in log
              else np.arange(1, num_epochs + 1, dtype="float64"))
    from matplotlib.ticker import MaxNLocator

    figure = _figures.new_figure(3.6 * len(metrics), 2.8)
    for index, name in enumerate(metrics, start=1):
        axes = figure.add_subplot(1, len(metrics), index)
        axes.plot(epochs, log[name], marker="o", markersize=3,
                  label="training")
        if f"val_{name}" in log:
            axes.plot(epochs, log[f"val_{name}"], marker="o", markersize=3,
                      label="validation")
        axes.set_title(name, fontsize=9)
        axes.set_xlabel("epoch", fontsize=8)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.tick_params(labelsize=7)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    return figure
