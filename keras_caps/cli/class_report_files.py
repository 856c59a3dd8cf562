"""`keras-caps evaluate --class-report DIR`: the class report's files,
checked before the evaluation and written after it."""

import os

CLASS_REPORT_FILE = "class_report.json"
CONFUSION_FIGURE = "confusion_matrix.png"


def check_class_report_folder(folder, dataset, weights):
    """Refuses, before anything is evaluated or written, a class report of
    official weights or of a multi-digit dataset, a folder that is a file
    or already holds a report's files, and a missing matplotlib."""
    from keras_caps.runs.output_files import check_files_absent
    from keras_caps.training.class_report import check_single_label
    from keras_caps.visualization import _figures

    if weights:
        raise ValueError(
            "--class-report scores a model saved by keras-caps "
            "(--model-path, a .keras file or an export). Received: "
            f"--weights={weights!r}")
    check_single_label(dataset)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(
            "--class-report names a folder to write the report in, but "
            f"{folder!r} is a file. Received: --class-report={folder!r}")
    check_files_absent(folder, (CLASS_REPORT_FILE, CONFUSION_FIGURE),
                       "--class-report")
    try:
        _figures.require_matplotlib()
    except ImportError:
        raise ValueError(
            "--class-report draws the confusion matrix with matplotlib, "
            f"which is not installed: {_figures.INSTALL_HINT}") from None


def write_class_report(folder, report):
    """Writes `report` (`class_report`'s) to `folder`: the JSON and the
    confusion-matrix figure. Returns what the printed record keeps: the
    files, the accuracy and the averages (the full report is in the
    file)."""
    from keras_caps.runs.atomic_files import write_atomically
    from keras_caps.runs.atomic_files import write_json_atomically
    from keras_caps.visualization import plot_confusion_matrix

    paths = {name: os.path.join(folder, name)
             for name in (CLASS_REPORT_FILE, CONFUSION_FIGURE)}
    # Checked again: the files may have appeared during the evaluation.
    check_class_report_folder(folder, None, None)
    write_json_atomically(paths[CLASS_REPORT_FILE], report)
    figure = plot_confusion_matrix(report)
    write_atomically(paths[CONFUSION_FIGURE], lambda temporary:
                     figure.savefig(temporary, dpi=100, format="png"))
    return {"files": [os.path.abspath(path) for path in paths.values()],
            "accuracy": report["accuracy"], "macro": report["macro"],
            "weighted": report["weighted"]}
