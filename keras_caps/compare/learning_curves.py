"""Learning curves of a comparison: holdout accuracy against training steps.

A fixed small budget ranks how fast models learn, not where they end
(Sabour et al. 2017, section 5.2, compare at matched accuracy instead):
the curves of every model in one plot show both. Each run of
`keras_caps.training.train` logs one row per epoch in its `history.csv`
(the validation accuracy it selects on, `metrics.json`'s `monitor`); the
epoch's end is step `(epoch + 1) * train_steps_per_epoch`.
"""

import os

import numpy as np

from keras_caps.runs.atomic_files import write_atomically
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.training.best_checkpoint import resolve_monitor
from keras_caps.visualization.training_curves import read_training_log


def read_learning_curve(run_folder):
    """One run's validation accuracy at each epoch's end.

    Args:
        run_folder: str. A finished run of `keras_caps.training.train`.

    Returns:
        `{"monitor": key, "x": "steps", "steps": [...], "accuracy": [...]}`
        (`"x": "epochs"` and epoch numbers when the run does not record
        its steps per epoch), or `None` when the run has no readable
        `history.csv` and `metrics.json`.

    Example:

    ```python
    curve = read_learning_curve("runs/compare/models/dynamic_seed0")
    curve["steps"], curve["accuracy"]
    ```
    """
    try:
        metrics = read_json_record(os.path.join(run_folder, "metrics.json"))
        log = read_training_log(os.path.join(run_folder, "history.csv"))
    except (OSError, ValueError, UnreadableRecordError):
        return None
    if "epoch" not in log:
        return None
    monitor = metrics.get("monitor") or resolve_monitor("auto", log)
    steps_per_epoch = metrics.get("train_steps_per_epoch")
    epochs = [int(epoch) + 1 for epoch in log["epoch"]]
    return {
        "monitor": monitor,
        "x": "epochs" if steps_per_epoch is None else "steps",
        "steps": epochs if steps_per_epoch is None
        else [epoch * steps_per_epoch for epoch in epochs],
        "accuracy": [float(value) for value in log[monitor]],
    }


def learning_curves(folders):
    """The curves of each model, over its seeds.

    Args:
        folders: dict. `{model: {seed: run folder}}`.

    Returns:
        `{model: {"seeds": {"<seed>": curve}, "steps": [...], "mean":
        [...], "std": [...]}}`: each seed's `read_learning_curve`, and the
        mean and sample standard deviation (`None` for one seed) over the
        seeds at the steps every seed reached (a model trained until an
        accuracy may stop at other steps for each seed). A seed without a
        curve is left out.

    Example:

    ```python
    curves = learning_curves({"dynamic": {0: "runs/c/models/dynamic_seed0",
                                          1: "runs/c/models/dynamic_seed1"}})
    ```
    """
    result = {}
    for model, by_seed in folders.items():
        seeds = {str(seed): curve for seed, folder in by_seed.items()
                 if (curve := read_learning_curve(folder)) is not None}
        shared = sorted(set.intersection(
            *[set(curve["steps"]) for curve in seeds.values()])
            if seeds else set())
        values = np.array([[curve["accuracy"][curve["steps"].index(step)]
                            for step in shared]
                           for curve in seeds.values()], dtype="float64")
        result[model] = {
            "seeds": seeds, "steps": shared,
            "mean": values.mean(axis=0).tolist() if shared else [],
            "std": (values.std(axis=0, ddof=1).tolist()
                    if shared and len(seeds) > 1 else None),
        }
    return result


def plot_learning_curves(curves, path, dpi=100):
    """Every model's learning curves in one plot.

    One faint line per seed, and the mean over seeds (with a +-std band
    for two seeds or more) at the steps every seed reached. Raises
    `ImportError` without matplotlib.

    Args:
        curves: dict. `learning_curves`' result.
        path: str. The PNG to write (atomically).
        dpi: int. Its resolution.

    Example:

    ```python
    plot_learning_curves(results["learning_curves"], "curves.png")
    ```
    """
    from keras_caps.visualization import _figures

    figure = _figures.new_figure(6.0 + _figures.LEGEND_WIDTH, 4.0)
    axis = figure.subplots()
    x_label = "training steps"
    for index, (model, curve) in enumerate(curves.items()):
        style = _figures.series_style(index)
        for seed_curve in curve["seeds"].values():
            axis.plot(seed_curve["steps"],
                      100 * np.asarray(seed_curve["accuracy"]), alpha=0.3,
                      linewidth=0.8, **style)
            if seed_curve["x"] == "epochs":
                x_label = "training steps (epochs where unrecorded)"
        if curve["steps"]:
            mean = 100 * np.asarray(curve["mean"])
            axis.plot(curve["steps"], mean, marker="o", markersize=3,
                      label=model, **style)
            if curve["std"] is not None:
                std = 100 * np.asarray(curve["std"])
                axis.fill_between(curve["steps"], mean - std, mean + std,
                                  color=style["color"], alpha=0.15)
    axis.set_xlabel(x_label)
    axis.set_ylabel("holdout accuracy (%)")
    axis.set_title("learning curves (faint: one seed; bold: mean)")
    axis.grid(alpha=0.3)
    _figures.legend_beside(figure, axis)
    write_atomically(path, lambda temporary: figure.savefig(temporary,
                                                            dpi=dpi))
    return path


def until_accuracy_notes(results):
    """The table's note on a comparison trained until an accuracy: the
    target, and the models that did not reach it (kept, at their best
    epoch); `[]` without a target.

    Args:
        results: dict. `compare`'s results (`"settings"`, `"models"`).

    Example:

    ```python
    lines += until_accuracy_notes(results)
    ```
    """
    target = results["settings"].get("until_accuracy")
    if target is None:
        return []
    missed = [f"{run['router']} (seed {run['seed']})"
              for run in results["models"]
              if not (run.get("until_accuracy") or {}).get("reached")]
    lines = ["", f"Each model trained until its holdout accuracy reached "
             f"{100 * target:.2f} % (at most {results['settings']['epochs']}"
             " epochs) and was selected at the first epoch that reached it "
             "(Sabour et al. 2017, section 5.2: matched clean accuracy)."]
    if missed:
        lines[-1] += (" Not reached within the maximum, kept and selected "
                      "at their best epoch: " + ", ".join(missed) + ".")
    else:
        lines[-1] += " Every model reached it."
    return lines
