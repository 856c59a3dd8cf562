"""The confusion matrix of a class report, as a heat map."""

import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.visualization import _figures

# Up to this many classes every cell shows its count, and every class its
# name; beyond, the cells are colour only and about this many names show.
_ANNOTATED_CLASSES = 20
_NAMED_CLASSES = 40


@keras_caps_export("keras_caps.visualization.plot_confusion_matrix")
def plot_confusion_matrix(report, title=None):
    """Draws a class report's confusion matrix: true classes down, predicted
    classes across, each row coloured by its share of the class's test
    images (so a row's diagonal cell is the class's recall, whatever its
    support), the counts written in the cells for up to 20 classes.

    Args:
        report: dict. `keras_caps.training.class_report.class_report`'s
            (or the `class_report.json` `keras-caps evaluate
            --class-report` writes).
        title: str or `None`. Defaults to the accuracy and the macro F1.

    Returns:
        A `matplotlib.figure.Figure`.

    Example:

    >>> from keras_caps.training.class_report import class_report
    >>> report = class_report([0, 1, 1], [0, 1, 0], ["cat", "dog"])
    >>> figure = plot_confusion_matrix(report)  # doctest: +SKIP
    >>> figure.savefig("confusion_matrix.png")  # doctest: +SKIP
    """
    confusion = np.asarray(report["confusion_matrix"], "float64")
    names = [entry["class"] for entry in report["classes"]]
    count = len(names)
    rows = confusion.sum(axis=1, keepdims=True)
    shares = np.divide(confusion, rows, out=np.zeros_like(confusion),
                       where=rows > 0)
    side = min(14.0, 3.0 + 0.35 * count)
    figure = _figures.new_figure(side + 1.5, side)
    axes = figure.add_subplot()
    image = axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0,
                        interpolation="nearest")
    figure.colorbar(image, ax=axes, label="share of the true class's images")
    if count <= _ANNOTATED_CLASSES:
        _write_counts(axes, confusion, shares)
    ticks = np.arange(0, count, max(1, int(np.ceil(count / _NAMED_CLASSES))))
    axes.set_xticks(ticks, [names[index] for index in ticks], rotation=90)
    axes.set_yticks(ticks, [names[index] for index in ticks])
    axes.set_xlabel("predicted class")
    axes.set_ylabel("true class")
    if title is None:
        title = _default_title(report)
    axes.set_title(title)
    return figure


def _write_counts(axes, confusion, shares):
    """Each cell's count, in white on the dark cells."""
    for row, column in np.ndindex(confusion.shape):
        axes.text(column, row, f"{int(confusion[row, column])}",
                  ha="center", va="center", fontsize=8,
                  color="white" if shares[row, column] > 0.5 else "black")


def _default_title(report):
    """"accuracy A %, macro F1 F" from the report's numbers."""
    accuracy, f1 = report.get("accuracy"), report["macro"]["f1"]
    parts = [f"accuracy {100 * accuracy:.2f} %" if accuracy is not None
             else "no test images",
             f"macro F1 {f1:.3f}" if f1 is not None else None]
    return ", ".join(part for part in parts if part)
