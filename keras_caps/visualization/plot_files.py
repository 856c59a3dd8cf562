"""`keras-caps plot`: figures of a saved model written as PNG files."""

import os

import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.inference import check_pixel_range
from keras_caps.visualization import _figures
from keras_caps.visualization.capsule_perturbation_grid import (
    plot_capsule_perturbations,
)
from keras_caps.visualization.credit_overlays import plot_credit_overlays
from keras_caps.visualization.reconstruction_grid import plot_reconstructions
from keras_caps.visualization.routing_maps import plot_routing_maps
from keras_caps.visualization.training_curves import plot_training_curves

PLOT_KINDS = ("reconstructions", "perturbation", "routing", "credit",
              "curves")
PLOT_MARK = "keras-caps plot"
"""The `written_by` text entry of the PNG files `plot_to_file` writes: only
such a file is replaced by a later plot."""


@keras_caps_export("keras_caps.visualization.plot_to_file")
def plot_to_file(kind, output, *, model_path=None, log_path=None,
                 dataset="mnist", data_dir=None, num_images=10, index=0,
                 class_index=None, layer_names=None, dpi=100,
                 dataset_options=None, download=True):
    """Draws one figure of a saved model (or a training log) to a PNG file.

    The figures are those of `keras_caps.visualization`, on the first
    images of the dataset's test split:

    - `"reconstructions"`: `plot_reconstructions` of `num_images` images;
    - `"perturbation"`: `plot_capsule_perturbations` of test image `index`;
    - `"routing"`: `plot_routing_maps` of test image `index`;
    - `"credit"`: `plot_credit_overlays` of `num_images` images;
    - `"curves"`: `plot_training_curves` of `log_path` (defaults to the
      `history.csv` beside `model_path`).

    Args:
        kind: str. One of `PLOT_KINDS`.
        output: str. The PNG file to write (folders are created): a new
            file, or a PNG an earlier `plot_to_file` (`keras-caps plot`)
            wrote, which it replaces. Any other file, and a training run's
            or a comparison's own files, are refused (`ValueError`) before
            anything is drawn. The file is written atomically.
        model_path: str. A `.keras` model. Needed for all kinds but
            `"curves"`.
        log_path: str. The CSV log, for `"curves"`.
        dataset: str. A `keras_caps.datasets` name. Defaults to `"mnist"`.
        data_dir: str. Local data folder, see `keras_caps.datasets.load`.
        num_images: int. Defaults to `10`.
        index: int. Test image for `"perturbation"` and `"routing"`.
            Defaults to `0`.
        class_index: int. Class for `"perturbation"` and `"credit"`.
            Defaults to `None`: the predicted class.
        layer_names: list of str. Routing layers for `"routing"`. Defaults
            to `None`: all.
        dpi: int. Defaults to `100`.
        dataset_options: dict of dataset-specific loader options.
        download: bool. Let TFDS download a dataset that is not prepared
            (see `keras_caps.datasets.load`). Defaults to `True`.

    Returns:
        `output`.
    """
    if kind not in PLOT_KINDS:
        raise ValueError(
            f"Unknown plot `kind`. Expected one of {list(PLOT_KINDS)}. "
            f"Received: kind={kind!r}")
    from keras_caps.runs.output_files import check_output_path

    # Before the (slow) drawing: `output` is new or an earlier plot's.
    check_output_path(output, PLOT_MARK, "output")
    _figures.require_matplotlib()
    if kind == "curves":
        if log_path is None:
            if model_path is None:
                raise ValueError(
                    "The `curves` plot needs a training log: pass "
                    "`--log` (or `--model-path`, whose folder holds "
                    "history.csv). Received: neither")
            log_path = os.path.join(os.path.dirname(model_path) or ".",
                                    "history.csv")
        figure = plot_training_curves(log_path)
    else:
        model = _load_model(model_path)
        count = index + 1 if kind in ("perturbation", "routing") else (
            num_images)
        images, labels = _test_images(model, dataset, count, data_dir,
                                      dataset_options or {}, download)
        if kind == "reconstructions":
            figure = plot_reconstructions(
                model, images, labels=labels)
        elif kind == "perturbation":
            figure = plot_capsule_perturbations(
                model, images[index], class_index=class_index)
        elif kind == "routing":
            figure = plot_routing_maps(
                model, images[index], layer_names=layer_names)
        else:
            figure = plot_credit_overlays(
                model, images, class_index=class_index)
    _write_figure(figure, output, dpi)
    return output


def _write_figure(figure, output, dpi):
    """Saves `figure` as a PNG marked as plot's own, atomically."""
    from keras_caps.runs.atomic_files import write_atomically
    from keras_caps.runs.output_files import WRITTEN_BY
    from keras_caps.runs.output_files import check_output_path

    # Checked again: the file may have appeared while the figure was drawn.
    check_output_path(output, PLOT_MARK, "output")
    write_atomically(output, lambda temporary: figure.savefig(
        temporary, dpi=dpi, format="png", metadata={WRITTEN_BY: PLOT_MARK}))


def _load_model(model_path):
    from keras_caps.inference import load_model_file

    return load_model_file(model_path, "--model-path")


def _test_images(model, dataset, count, data_dir, options, download):
    """The first `count` test images (raw pixels) and their labels;
    refuses a dataset whose classes are not the model's, as `evaluate`
    does (a 4-class model drawn against MNIST's 10 labels)."""
    from keras_caps import datasets
    from keras_caps.training.data_batches import first_batch
    from keras_caps.training.model_building import check_labels_match

    batches = datasets.load(dataset, "test", batch_size=count,
                            training=False, data_dir=data_dir,
                            reconstruction=False, download=download,
                            **options)
    first = first_batch(batches)
    if first is not None:
        check_labels_match(model, batches)
    if first is None:
        raise ValueError(
            f"The {dataset!r} test split is empty: the figure needs "
            f"{count} test image(s). Pass a `--data-dir` whose test split "
            f"has images. Received: data_dir={data_dir!r}")
    images, labels = np.asarray(first[0]), np.asarray(first[1])
    check_pixel_range(images, f"the {dataset!r} test images")
    if len(images) < count:
        raise ValueError(
            f"The {dataset!r} test split has only {len(images)} images. "
            f"Received: a request for {count} images")
    return images, (labels if labels.ndim == 2 else None)
