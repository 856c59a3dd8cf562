"""`keras-caps compare`: every router on one stem, one recipe, many seeds.

`compare(routers, dataset, seeds=..., output_dir=...)` trains
`CapsuleClassifier` with each router (and the `CNNBaseline`) for each seed
with the training recipe of `keras-caps train` (`keras_caps.training.
train`: the preset's optimizer, schedule, augmentation and batch size,
the same epochs and steps, model selection on the holdout), one model
after the other, each in a process of its own (or after
`keras.backend.clear_session()`), then
evaluates every selected model on the same clean and corrupted test data
(`keras_caps.evaluation.robustness`). It writes under `output_dir`:

- `compare.json`: the comparison's settings (a folder made with other
  settings is refused, nothing overwritten);
- `models/<router>_seed<seed>/`: each run of `keras_caps.training.train`
  (`model.keras`, `metrics.json`, ...) and its `robustness.json`;
- `results.md`, `results.csv`, `results.json`: the table;
- `accuracy_vs_severity.png`: accuracy against each corruption's severity,
  one line per router with a +-std band (needs matplotlib).

It resumes: a model whose run has finished (`metrics.json` written) is not
trained again, and its evaluation is reused; a run killed halfway resumes
from its backup (see `keras_caps.training.train`).
"""

import csv
import gc
import io
import json
import logging
import os
import subprocess
import sys
import warnings

import keras
import numpy as np

from keras_caps import datasets
from keras_caps import training
from keras_caps.applications.capsule_classifier import (
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.evaluation import robustness
from keras_caps.training.atomic_files import write_json_atomically
from keras_caps.training.atomic_files import write_text_atomically
from keras_caps.training.training_settings import PROTOCOLS
from keras_caps.training.training_settings import TrainingSettings

# Comparison names -> `keras-caps train --model` names.
COMPARED_MODELS = {
    **{router: f"capsule_classifier_{router}" for router in ROUTERS},
    "cnn": "cnn_baseline",
}
_SEVERITY_LABELS = {"noise": "noise std", "pixels": "pixels replaced",
                    "occlusion": "occluded side (px)"}
SETTINGS_FILE = "compare.json"
ISOLATIONS = ("process", "session")


def compare(routers=None, dataset="mnist", *, output_dir, seeds=(0, 1),
            epochs=None, steps_per_epoch=None, batch_size=None,
            data_dir=None, validation="holdout", reconstruction=True,
            corruptions=None, evaluation_seed=1234, isolation="process",
            verbose=0, download=True):
    """Trains and evaluates each router for each seed; writes the table.

    Args:
        routers: list of str. Keys of `COMPARED_MODELS` (the routers of
            `CapsuleClassifier` and `"cnn"`). Defaults to all of them.
        dataset: str. A `CapsuleClassifier` preset: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"` or `"mnist_canvas"`.
        output_dir: str. The comparison's folder.
        seeds: list of int. One model per router and seed. Defaults to
            `(0, 1)`.
        epochs, steps_per_epoch, batch_size: The recipe's budget, as in
            `keras_caps.training.train` (preset defaults: 150 epochs of the
            whole training split, batch 16).
        data_dir: str or `None`. The data folder.
        download: bool. Without a data folder, let TFDS download the
            dataset if it is not prepared. Defaults to `True`.
        validation: str. `"holdout"` (default) or `"test"`.
        reconstruction: bool. Train the capsule models with their decoder
            (the CNN has none). Defaults to `True`.
        corruptions: dict or `None`; see
            `keras_caps.evaluation.robustness.check_corruptions`.
        evaluation_seed: int. Seeds the corruptions, the same for every
            model. Defaults to `1234`.
        isolation: str. `"process"` (default): each model trains and is
            evaluated in a process of its own, so the peak memory is one
            model's; `"session"`: in this process, after
            `keras.backend.clear_session()` (no process start-up, but
            memory grows by some megabytes per model).
        verbose: Keras `fit` verbosity. Defaults to `0`.

    Returns:
        dict: the `results.json` record (`"settings"`, `"models"` per
        run, `"routers"` aggregated over seeds).

    Example:

    >>> results = compare(  # doctest: +SKIP
    ...     ["self_attention", "dynamic", "cnn"], "mnist",
    ...     output_dir="runs/compare", seeds=[0, 1], epochs=2,
    ...     corruptions={"noise": [0.1, 0.2, 0.4]})
    """
    settings = _check_settings(
        routers, dataset, seeds, epochs, steps_per_epoch, batch_size,
        validation, reconstruction, corruptions, evaluation_seed)
    if isolation not in ISOLATIONS:
        raise ValueError(
            f"Unknown `isolation`. Expected one of {list(ISOLATIONS)}. "
            f"Received: isolation={isolation!r}")
    _claim_output_dir(output_dir, settings)
    runs = []
    for router in settings["routers"]:
        for seed in settings["seeds"]:
            runs.append(_run_model(router, seed, settings, output_dir,
                                   data_dir, verbose, isolation, download))
    steps = _steps_per_epoch(settings, data_dir, download)
    results = {"settings": settings, "models": runs,
               "routers": _aggregate(runs, settings, steps)}
    write_json_atomically(os.path.join(output_dir, "results.json"), results)
    write_text_atomically(os.path.join(output_dir, "results.csv"),
                          results_csv(results))
    write_text_atomically(os.path.join(output_dir, "results.md"),
                          results_markdown(results))
    plot_path = os.path.join(output_dir, "accuracy_vs_severity.png")
    try:
        plot_accuracy_vs_severity(results, plot_path)
    except ImportError as error:  # matplotlib is an optional extra.
        warnings.warn(f"No plot written: {error}", UserWarning, stacklevel=2)
    return results


def _check_settings(routers, dataset, seeds, epochs, steps_per_epoch,
                    batch_size, validation, reconstruction, corruptions,
                    evaluation_seed):
    """The comparison's settings (`compare.json`), checked and resolved."""
    routers = _check_routers(routers)
    seeds = _check_seeds(seeds)
    if dataset not in CAPSULE_CLASSIFIER_PRESETS:
        raise ValueError(
            "Unknown `dataset`. Expected one of "
            f"{sorted(CAPSULE_CLASSIFIER_PRESETS)}. Received: "
            f"dataset={dataset!r}")
    # The recipe's fields are those of each model's `TrainingSettings`,
    # checked as such.
    recipe = TrainingSettings(
        COMPARED_MODELS[routers[0]], dataset, epochs=epochs,
        steps_per_epoch=steps_per_epoch, batch_size=batch_size,
        validation=validation)
    preset = CAPSULE_CLASSIFIER_PRESETS[dataset]
    return {
        "routers": routers, "dataset": dataset, "seeds": seeds,
        "epochs": preset["epochs"] if epochs is None else recipe.epochs,
        "steps_per_epoch": recipe.steps_per_epoch,
        "batch_size": preset["batch_size"] if batch_size is None
        else recipe.batch_size,
        "validation": validation,
        "reconstruction": bool(reconstruction),
        "corruptions": robustness.check_corruptions(dataset, corruptions),
        "evaluation_seed": int(evaluation_seed),
    }


def _check_routers(routers):
    routers = list(COMPARED_MODELS) if routers is None else list(routers)
    if not routers:
        raise ValueError("Expected at least one router. Received: "
                         "routers=[]")
    unknown = [name for name in routers if name not in COMPARED_MODELS]
    if unknown:
        raise ValueError(
            f"Unknown routers {unknown}. Expected some of "
            f"{list(COMPARED_MODELS)}. Received: routers={routers!r}")
    duplicates = sorted({name for name in routers if routers.count(name) > 1})
    if duplicates:
        raise ValueError(f"Duplicate routers {duplicates}. Received: "
                         f"routers={routers!r}")
    return routers


def _check_seeds(seeds):
    if isinstance(seeds, int):
        raise TypeError("Expected a list of seeds. Received: "
                        f"seeds={seeds!r}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("Expected at least one seed. Received: seeds=[]")
    if any(isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
           for seed in seeds):
        raise TypeError(f"Seeds must be integers. Received: seeds={seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"Duplicate seeds. Received: seeds={seeds!r}")
    return [int(seed) for seed in seeds]


def training_settings(settings, router, seed):
    """The `TrainingSettings` of one model of a comparison.

    Args:
        settings: dict. The comparison's settings (`compare.json`).
        router: str. A key of `COMPARED_MODELS`.
        seed: int. One of the comparison's seeds.

    Example:

    ```python
    training_settings(results["settings"], "dynamic", 0).to_record()
    ```
    """
    return TrainingSettings(
        COMPARED_MODELS[router], settings["dataset"],
        epochs=settings["epochs"],
        steps_per_epoch=settings["steps_per_epoch"],
        batch_size=settings["batch_size"], seed=seed,
        validation=settings["validation"],
        # The CNN has no decoder.
        reconstruction=settings["reconstruction"] and router != "cnn")


def _claim_output_dir(output_dir, settings):
    """Writes `compare.json`, or refuses a folder made with another recipe.

    The routers may differ from the folder's: a comparison can be
    extended with a router (only its models train) or reported for a
    subset; every other setting must be the same.
    """
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.exists(path):
        with open(path) as file:
            previous = json.load(file)
        current = json.loads(json.dumps(settings))
        differing = sorted(key for key in set(previous) | set(current)
                           if key != "routers"
                           and previous.get(key) != current.get(key))
        if differing:
            raise ValueError(
                f"{output_dir!r} holds a comparison made with other "
                f"settings (differing: {differing}); nothing was "
                "overwritten. Use another --output-dir, or the same "
                "settings (any routers) to resume or extend it. Found: "
                f"{previous}")
        if previous != current:
            write_json_atomically(path, settings)
        return
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise ValueError(
            f"{output_dir!r} is not empty and holds no {SETTINGS_FILE}: "
            "it is not a comparison folder; nothing was overwritten. "
            "Choose an empty or new --output-dir.")
    os.makedirs(output_dir, exist_ok=True)
    write_json_atomically(path, settings)


def run_dir(output_dir, router, seed):
    """The folder of one trained model of a comparison."""
    return os.path.join(output_dir, "models", f"{router}_seed{seed}")


def _evaluation_settings(settings):
    return {"corruptions": settings["corruptions"],
            "seed": settings["evaluation_seed"]}


def _finished_evaluation(folder, evaluation):
    """The model's `robustness.json` if made with these `evaluation`
    settings (`_evaluation_settings`)."""
    path = os.path.join(folder, "robustness.json")
    if not os.path.exists(path):
        return None
    with open(path) as file:
        finished = json.load(file)
    if finished.get("settings") != json.loads(json.dumps(evaluation)):
        return None
    return finished


def _run_model(router, seed, settings, output_dir, data_dir, verbose,
               isolation, download):
    """Trains and evaluates one model unless done; returns its record."""
    folder = run_dir(output_dir, router, seed)
    evaluation = _evaluation_settings(settings)
    metrics_path = os.path.join(folder, "metrics.json")
    trained_before = os.path.exists(metrics_path)
    task = {"router": router,
            "settings": training_settings(settings, router, seed),
            "folder": folder, "evaluation": evaluation,
            "data_dir": data_dir, "verbose": verbose, "download": download}
    if trained_before and _finished_evaluation(folder, evaluation):
        logging.info("%s, seed %d: already trained and evaluated", router,
                     seed)
    elif isolation == "process":
        _train_and_evaluate_in_a_process(task)
    else:
        train_and_evaluate(**task)
        _free_memory()
    with open(metrics_path) as file:
        training_record = json.load(file)
    return {"router": router, "seed": seed,
            "model_path": os.path.join(folder, "model.keras"),
            "trained_now": not trained_before,
            "train_seconds": training_record["train_seconds_this_run"],
            "selected_epoch": training_record["selected_epoch"],
            "hardware": training_record["hardware"],
            "evaluation": _finished_evaluation(folder, evaluation)}


def _train_and_evaluate_in_a_process(task):
    """`train_and_evaluate(**task)` in a child process.

    The child receives the task as one JSON object, by argument name, with
    the settings as their record (`TrainingSettings.to_record()`).
    """
    arguments = json.dumps({**task, "settings": task["settings"].to_record()})
    # The child imports this very keras_caps, installed or not.
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root if not path
           else package_root + os.pathsep + path}
    completed = subprocess.run(  # noqa: S603 (our own module)
        [sys.executable, "-m", "keras_caps.evaluation.comparison",
         arguments], check=False, env=env)
    if completed.returncode:
        raise RuntimeError(
            f"Training or evaluating {task['router']!r} with seed "
            f"{task['settings'].seed} failed in its process (exit code "
            f"{completed.returncode}); its output is above. Rerun the same "
            "command to resume.")


def train_and_evaluate(router, settings, folder, evaluation, *,
                       data_dir=None, verbose=0, download=True):
    """One model of a comparison: trains it unless done, evaluates it.

    Writes the run of `keras_caps.training.train` in `folder` and its
    `robustness.json`.

    Args:
        router: str. The model's name in the comparison (for the log).
        settings: `TrainingSettings`. The model's (`training_settings`).
        folder: str. The model's run folder (`run_dir`).
        evaluation: dict. `{"corruptions": ..., "seed": ...}`, the
            corruptions of `keras_caps.evaluation.evaluate_robustness` and
            their seed.
        data_dir: str or `None`. The data folder.
        verbose: Keras `fit` verbosity. Defaults to `0`.
        download: bool. Let TFDS download a dataset that is not prepared.

    Example:

    ```python
    train_and_evaluate("cnn", training_settings(compared, "cnn", 0),
                       run_dir("runs/compare", "cnn", 0),
                       {"corruptions": compared["corruptions"], "seed": 1234})
    ```
    """
    evaluation_path = os.path.join(folder, "robustness.json")
    if not os.path.exists(os.path.join(folder, "metrics.json")):
        logging.info("%s, seed %d: training", router, settings.seed)
        if os.path.exists(evaluation_path):
            os.remove(evaluation_path)  # Of an earlier, unfinished model.
        training.train(output_dir=folder, settings=settings,
                       data_dir=data_dir, verbose=verbose, download=download)
        _free_memory()
    if _finished_evaluation(folder, evaluation) is None:
        logging.info("%s, seed %d: evaluating", router, settings.seed)
        record = robustness.evaluate_robustness(
            os.path.join(folder, "model.keras"), settings.dataset,
            corruptions=evaluation["corruptions"], data_dir=data_dir,
            seed=evaluation["seed"], download=download)
        write_json_atomically(evaluation_path,
                              {"settings": evaluation, **record})


def _free_memory():
    keras.backend.clear_session()
    gc.collect()


def _steps_per_epoch(settings, data_dir, download):
    if settings["steps_per_epoch"] is not None:
        return settings["steps_per_epoch"]
    train = datasets.load(settings["dataset"], "train",
                          batch_size=settings["batch_size"],
                          data_dir=data_dir, download=download,
                          validation=settings["validation"])
    return int(train.cardinality())


def columns(settings):
    """`(key, title)` of each accuracy column: clean, then corruptions."""
    result = [("clean", "clean")]
    corruptions = settings["corruptions"]
    for kind in ("noise", "pixels", "occlusion"):
        for severity in corruptions[kind]:
            result.append((f"{kind}:{severity}",
                           f"{_SEVERITY_LABELS[kind]} {severity}"))
    if corruptions["affine"]:
        result.append(("affine", "affine (generated)"))
    return result


def _accuracy(evaluation, key):
    if key == "clean":
        return evaluation["clean"]["accuracy"]
    if key == "affine":
        return evaluation["affine"]
    kind, severity = key.split(":")
    return evaluation[kind][severity]


def _mean_std(values):
    values = np.asarray(values, dtype="float64")
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {"mean": float(values.mean()), "std": std}


def _aggregate(runs, settings, steps_per_epoch):
    """Per router: means and sample standard deviations over seeds."""
    total_steps = settings["epochs"] * steps_per_epoch
    aggregated = {}
    for router in settings["routers"]:
        mine = [run for run in runs if run["router"] == router]
        evaluations = [run["evaluation"] for run in mine]
        aggregated[router] = {
            "num_seeds": len(mine),
            "trainable_parameters": evaluations[0]["trainable_parameters"],
            "accuracy": {key: _mean_std([_accuracy(e, key)
                                         for e in evaluations])
                         for key, _ in columns(settings)},
            "macro_accuracy": _mean_std(
                [e["clean"]["macro_accuracy"] for e in evaluations]),
            "train_ms_per_step": float(np.mean(
                [1000.0 * run["train_seconds"] / total_steps
                 for run in mine])),
            "images_per_second": float(np.mean(
                [e["clean"]["images_per_second"] for e in evaluations])),
        }
    return aggregated


def _percent(stats):
    return f"{100 * stats['mean']:.2f} ± {100 * stats['std']:.2f}"


def results_csv(results):
    """The table as CSV: one row per router, accuracies as fractions."""
    settings = results["settings"]
    output = io.StringIO()
    writer = csv.writer(output, lineterminator="\n")
    header = ["router", "trainable_parameters", "train_ms_per_step",
              "images_per_second", "macro_accuracy_mean",
              "macro_accuracy_std"]
    for key, _ in columns(settings):
        header += [f"{key}_mean", f"{key}_std"]
    writer.writerow(header)
    for router, row in results["routers"].items():
        values = [router, row["trainable_parameters"],
                  f"{row['train_ms_per_step']:.3f}",
                  f"{row['images_per_second']:.1f}",
                  repr(row["macro_accuracy"]["mean"]),
                  repr(row["macro_accuracy"]["std"])]
        for key, _ in columns(settings):
            values += [repr(row["accuracy"][key]["mean"]),
                       repr(row["accuracy"][key]["std"])]
        writer.writerow(values)
    return output.getvalue()


def results_markdown(results):
    """The table as Markdown, with the protocol it was measured under."""
    settings = results["settings"]
    runs = results["models"]
    hardware = runs[0]["hardware"] if runs else "unknown"
    steps = ("all" if settings["steps_per_epoch"] is None
             else settings["steps_per_epoch"])
    lines = [
        f"Dataset `{settings['dataset']}`, {len(settings['seeds'])} seeds "
        f"{settings['seeds']}, {settings['epochs']} epochs of {steps} "
        f"steps, batch {settings['batch_size']}, one recipe "
        f"(Efficient-CapsNet's optimizer and schedule), model selection: "
        f"{PROTOCOLS[settings['validation']]}; capsule models "
        f"{'with' if settings['reconstruction'] else 'without'} their "
        f"decoder. Test accuracy in %, mean ± sample std over seeds; "
        f"corruptions seeded with {settings['evaluation_seed']}. "
        f"Speed on {hardware}: training ms/step includes the per-epoch "
        "validation; images/s is inference on the clean test set.",
        "",
    ]
    titles = [title for _, title in columns(settings)]
    header = (["router", "params", "ms/step", "images/s", "macro acc"]
              + titles)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1))
                 + "|")
    for router, row in results["routers"].items():
        cells = [router, f"{row['trainable_parameters']:,}",
                 f"{row['train_ms_per_step']:.1f}",
                 f"{row['images_per_second']:.0f}",
                 _percent(row["macro_accuracy"])]
        cells += [_percent(row["accuracy"][key])
                  for key, _ in columns(settings)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_accuracy_vs_severity(results, path, dpi=100):
    """Accuracy against severity, one panel per corruption kind.

    One line per router (the mean over seeds) with a +-std band; severity 0
    is the clean accuracy. Raises `ImportError` without matplotlib.
    """
    from keras_caps.visualization import _figures

    settings = results["settings"]
    kinds = [kind for kind in ("noise", "pixels", "occlusion")
             if settings["corruptions"][kind]]
    figure = _figures.new_figure(4.0 * max(len(kinds), 1), 3.2)
    axes = figure.subplots(1, max(len(kinds), 1), squeeze=False)[0]
    for axis, kind in zip(axes, kinds or [None], strict=True):
        for router, row in results["routers"].items():
            severities = [0] + list(settings["corruptions"].get(kind) or [])
            keys = ["clean"] + [f"{kind}:{s}" for s in severities[1:]]
            mean = np.array([row["accuracy"][k]["mean"] for k in keys])
            std = np.array([row["accuracy"][k]["std"] for k in keys])
            (line,) = axis.plot(severities, 100 * mean, marker="o",
                                label=router)
            axis.fill_between(severities, 100 * (mean - std),
                              100 * (mean + std), color=line.get_color(),
                              alpha=0.2)
        axis.set_xlabel(_SEVERITY_LABELS.get(kind, "severity"))
        axis.set_ylabel("test accuracy (%)")
        axis.set_title(kind or "clean")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    figure.savefig(path, dpi=dpi)
    return path


def _main(argv):
    """Entry point of a model's own process: `train_and_evaluate`.

    `argv[0]` is the task as a JSON object by argument name (see
    `_train_and_evaluate_in_a_process`).
    """
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    task = json.loads(argv[0])
    task["settings"] = TrainingSettings.from_record(task["settings"])
    train_and_evaluate(**task)


if __name__ == "__main__":
    _main(sys.argv[1:])
