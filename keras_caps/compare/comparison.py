"""`keras-caps compare`: every router on one stem, one recipe, many seeds.

`compare(ComparisonSettings(routers, dataset, seeds=...), output_dir=...)`
trains `CapsuleClassifier` with each router (and the `CNNBaseline`) for
each seed
with the training recipe of `keras-caps train` (`keras_caps.training.
train`: the preset's optimizer, schedule, augmentation and batch size,
the same epochs and steps, model selection on the holdout), one model
after the other, each in a process of its own (or after
`keras.backend.clear_session()`), then
evaluates every selected model on the same clean and corrupted test data
(`keras_caps.evaluation.robustness`). It writes under `output_dir`:

- `compare.json`: the comparison's settings and its data (`"data"`: the
  data folder and the size and SHA-256 of each raw file read there, or
  the TFDS dataset's name and version): a folder made with other settings
  or other data is refused before anything trains, nothing overwritten;
- `models/<router>_seed<seed>/`: each run of `keras_caps.training.train`
  (`model.keras`, `metrics.json`, ...) and its `robustness.json`, with
  the predicted class of every test image clean and under each
  corruption (`predictions.npz`) and the confusion matrices
  (`confusion.npz`), see `keras_caps.evaluation.predictions`;
- `results.md`, `results.csv`, `results.json`: the table: means over
  seeds with 95 % intervals, each model tested against a reference
  (`keras_caps.compare.comparison_significance`), relative corruption
  errors;
- `accuracy_vs_severity.png`: accuracy against each corruption's severity,
  one line per router with a +-std band (needs matplotlib);
- `accuracy_vs_epsilon.png`: with attacks, accuracy against epsilon,
  one panel per attack (`keras_caps.compare.comparison_attacks`);
- `learning_curves.png`: every model's holdout accuracy against training
  steps (`keras_caps.compare.learning_curves`; its data is under
  `"learning_curves"` in `results.json`).

`workers` trains several models at once (a process each), and `shard`
only a share of them, so a job array fills one comparison folder; the
table is written once every model is finished (see
`keras_caps.compare.shards`).

It resumes: a model whose run has finished (`metrics.json` written) is not
trained again, and its evaluation is reused when it was made with the same
corruptions, attacks, seed and data (an unreadable `robustness.json` is computed
again, and so is one without a readable `predictions.npz`, as an earlier
keras_caps wrote them); a run killed halfway resumes from its backup (see
`keras_caps.training.train`). A `compare.json` written before the data
was recorded (by an earlier keras_caps, without `"data"`) is refused, not
adopted: nothing tells which data its models were trained on.

A dataset a user brings (`dataset="folder:PATH"`, `"npz:PATH"` or
`"tfds:NAME"`) trains every model on a `CapsuleClassifier` preset (the
closest to its images, or `preset`) and is evaluated on clean test data
only; see `keras_caps.compare.user_data_comparison`.

Training speed (ms/step) is each model's training time divided by the
optimizer steps taken in the same process (`train_seconds_this_run` /
`train_steps_this_run` of its `metrics.json`), so a resumed model is
timed on the steps it resumed with; a run whose record lacks the steps
(written by an earlier keras_caps) has no speed (`null`, "n/a").
"""

import logging
import os
import warnings

from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_process
from keras_caps.compare import learning_curves
from keras_caps.compare import shards
from keras_caps.compare.comparison_folder import claim_output_dir
from keras_caps.compare.comparison_folder import read_record
from keras_caps.compare.comparison_report import plot_accuracy_vs_severity
from keras_caps.compare.comparison_report import results_csv
from keras_caps.compare.comparison_report import results_markdown
from keras_caps.compare.comparison_results import results_record
from keras_caps.compare.comparison_results import run_costs
from keras_caps.compare.comparison_settings import ComparisonSettings
from keras_caps.compare.comparison_settings import check_reference
from keras_caps.compare.model_runs import evaluation_settings
from keras_caps.compare.model_runs import finished_evaluation
from keras_caps.compare.model_runs import free_memory
from keras_caps.compare.model_runs import run_dir
from keras_caps.compare.model_runs import train_and_evaluate
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.atomic_files import write_text_atomically
from keras_caps.training.backend_check import check_backend

ISOLATIONS = ("process", "session")


def compare(settings, *, output_dir, data_dir=None, download=True,
            read_options=None, reference=None, isolation="process",
            workers=1, shard=None, verbose=0):
    """Trains and evaluates each model for each seed; writes the table.

    Args:
        settings: `ComparisonSettings`. What the comparison is (the models,
            the dataset, the seeds, the recipe's budget, the corruptions
            and attacks); resolved against the data and recorded in
            `compare.json`.
        output_dir: str. The comparison's folder.
        data_dir: str or `None`. The data folder (else
            `$KERAS_CAPS_DATA_DIR`, else TFDS). Recorded with its files'
            sizes and SHA-256 (or the TFDS dataset's version): resuming
            with other data is refused.
        download: bool. Without a data folder, let TFDS download the
            dataset if it is not prepared. Defaults to `True`.
        read_options: dict or `None`. A user's dataset: how to read it,
            `image_size`, `color_mode`, `test_dir`, `test_share` (see
            `keras_caps.training.train`).
        reference: str or `None`. The model every other one is tested
            against on every column (`keras_caps.compare.
            comparison_significance.reference_tests`); `None`: the first
            of the routers. Only the report depends on it.
        isolation: str. `"process"` (default): each model trains and is
            evaluated in a process of its own, so the peak memory is one
            model's; the process dies with this one (see
            `keras_caps.compare.comparison_process`); `"session"`: in
            this process, after `keras.backend.clear_session()` (no
            process start-up, but memory grows by some megabytes per
            model).
        workers: int. Models trained at once, each in its own process
            (isolation="process"), on an equal share of the cores.
            Defaults to `1`.
        shard: `"K/N"`, `(K, N)` or `None`. Train only the K-th of N
            shares of the (model, seed) list (`keras_caps.compare.
            shards.shard_models`), so a job array fills one comparison
            folder from many machines; the table is written once every
            model is finished (by the last share, or a rerun without
            `shard`).
        verbose: Keras `fit` verbosity. Defaults to `0`.

    Returns:
        dict: the `results.json` record (`"settings"`: the settings'
        record with `"data"`, `"models"` per run, `"routers"` aggregated
        over seeds, `"statistics"`: the tests against the reference,
        `"learning_curves"` per router). When models of other shares are
        not finished yet, no table is written and the record holds
        `"settings"`, the finished `"models"` and `"unfinished"` (the
        models' folder names).

    Raises:
        ValueError: bad settings; an `output_dir` holding another
            comparison (other settings or data) or an unreadable record
            (the message names the file); a model's process refused its
            input (the message names the model).
        OSError: a model's process failed for its environment (a full
            disk, its folder in use) or was killed (the message names the
            model and the signal).
        KeyboardInterrupt: Ctrl-C; a model's process running then has
            stopped, every finished model is kept.

    Example:

    >>> settings = ComparisonSettings(  # doctest: +SKIP
    ...     ("self_attention", "dynamic", "cnn"), "mnist", seeds=(0, 1),
    ...     epochs=2, corruptions={"noise": [0.1, 0.2, 0.4]})
    >>> results = compare(settings, output_dir="runs/compare")  # doctest: +SKIP
    """
    if not isinstance(settings, ComparisonSettings):
        raise TypeError(
            "Expected `settings` to be a `ComparisonSettings`. Received: "
            f"settings={settings!r}")
    if isolation not in ISOLATIONS:
        raise ValueError(
            f"Unknown `isolation`. Expected one of {list(ISOLATIONS)}. "
            f"Received: isolation={isolation!r}")
    workers = shards.check_workers(workers, isolation)
    shard = shards.parse_shard(shard)
    # Every model trains with `train`: a backend it refuses is refused
    # before any data is read or the folder is claimed.
    check_backend("`keras-caps compare` (`keras_caps.compare.compare`)")
    settings = settings.resolve(data_dir=data_dir, download=download,
                                read_options=read_options)
    reference = check_reference(reference, settings.routers)
    claim_output_dir(output_dir, settings)
    data_dir = settings.models_data_dir(data_dir)
    models = settings.models()
    trained_now = _train_models(
        shards.shard_models(models, shard), settings, output_dir,
        (verbose, isolation, download, data_dir), workers)
    comparison_attacks.evaluate_transfers(
        settings, output_dir, models, run_dir,
        (_finished_model(settings, output_dir), data_dir, download))
    runs = [_model_record(router, seed, settings, output_dir, trained_now,
                          isolation)
            for router, seed in models]
    if None in runs:
        return _unfinished(settings, models, runs, shard)
    results = results_record(runs, settings, reference)
    _write_results(results, settings, output_dir)
    return results


def _finished_model(settings, output_dir):
    """`finished(router, seed)`: whether a model is trained and
    evaluated with the comparison's evaluation settings."""
    evaluation = evaluation_settings(settings)

    def finished(router, seed):
        folder = run_dir(output_dir, router, seed)
        return (os.path.exists(os.path.join(folder, "metrics.json"))
                and finished_evaluation(folder, evaluation) is not None)

    return finished


def _write_results(results, settings, output_dir):
    """Adds the learning curves to `results`, then writes the table
    (`results.json`, `.csv`, `.md`) and the plots."""
    results["learning_curves"] = learning_curves.learning_curves(
        {router: {seed: run_dir(output_dir, router, seed)
                  for seed in settings.seeds}
         for router in settings.routers})
    write_json_atomically(os.path.join(output_dir, "results.json"), results)
    write_text_atomically(os.path.join(output_dir, "results.csv"),
                          results_csv(results))
    write_text_atomically(os.path.join(output_dir, "results.md"),
                          results_markdown(results))
    plot_path = os.path.join(output_dir, "accuracy_vs_severity.png")
    try:
        plot_accuracy_vs_severity(results, plot_path)
        comparison_attacks.plot_accuracy_vs_epsilon(
            results, os.path.join(output_dir, "accuracy_vs_epsilon.png"))
        learning_curves.plot_learning_curves(
            results["learning_curves"],
            os.path.join(output_dir, "learning_curves.png"))
    except ImportError as error:  # matplotlib is an optional extra.
        warnings.warn(f"No plot written: {error}", UserWarning, stacklevel=3)


def _unfinished(settings, models, runs, shard):
    """What `compare` returns while models of other shares (or of another
    worker) are not finished: no table is written yet."""
    unfinished = [os.path.basename(run_dir("", router, seed))
                  for (router, seed), run in zip(models, runs, strict=True)
                  if run is None]
    where = ("the share that finishes last writes it, or rerun without "
             "--shard once every share has finished" if shard is not None
             else "rerun the same command once they are")
    logging.info("%d of %d models are finished; not yet %s, so no table "
                 "is written: %s.", len(models) - len(unfinished),
                 len(models), ", ".join(unfinished), where)
    return {"settings": settings.to_record(),
            "models": [run for run in runs if run is not None],
            "unfinished": unfinished}


def _train_models(models, settings, output_dir, options, workers):
    """Trains and evaluates each `(router, seed)` of `models` not done,
    `workers` at once; returns those that had no finished run before."""
    verbose, isolation, download, data_dir = options
    evaluation = evaluation_settings(settings)
    tasks, trained_now = [], set()
    for router, seed in models:
        folder = run_dir(output_dir, router, seed)
        if not os.path.exists(os.path.join(folder, "metrics.json")):
            trained_now.add((router, seed))
        elif finished_evaluation(folder, evaluation):
            logging.info("%s, seed %d: already trained and evaluated",
                         router, seed)
            continue
        tasks.append({"router": router,
                      "settings": settings.training_settings(router, seed),
                      "folder": folder, "evaluation": evaluation,
                      "data_dir": data_dir, "verbose": verbose,
                      "download": download})
    if isolation == "session":
        for task in tasks:
            train_and_evaluate(**task)
            free_memory()
        return trained_now
    tasks = [{**task, "settings": task["settings"].to_record()}
             for task in tasks]
    if workers == 1:
        for task in tasks:
            comparison_process.train_and_evaluate_in_a_process(task)
    else:
        comparison_process.train_and_evaluate_in_processes(tasks, workers)
    return trained_now


def _model_record(router, seed, settings, output_dir, trained_now,
                  isolation):
    """One model's record for the table; `None` while it is not finished
    (trained and evaluated: another share's, or another worker's)."""
    folder = run_dir(output_dir, router, seed)
    evaluation = finished_evaluation(folder,
                                      evaluation_settings(settings))
    metrics_path = os.path.join(folder, "metrics.json")
    transfer = comparison_attacks.transfer_record(settings, output_dir,
                                                  router, seed, run_dir)
    if (evaluation is None or transfer is None
            or not os.path.exists(metrics_path)):
        return None
    evaluation = comparison_attacks.with_transfer(evaluation, transfer)
    training_record = read_record(
        metrics_path, f"It is the training record of {router!r} with seed "
        f"{seed}: restore it, or move the model's folder {folder!r} out of "
        "the comparison to train that model again.")
    seconds = training_record["train_seconds_this_run"]
    steps = training_record.get("train_steps_this_run")
    return {"router": router, "seed": seed,
            "model_path": os.path.join(folder, "model.keras"),
            "trained_now": (router, seed) in trained_now,
            "train_seconds": seconds, "train_steps": steps,
            # `None`: unknown (no steps recorded, or none taken).
            "train_ms_per_step": (1000.0 * seconds / steps if steps
                                  else None),
            **run_costs(training_record, isolation,
                         (router, seed) not in trained_now),
            "selected_epoch": training_record["selected_epoch"],
            # Trained until an accuracy: whether and where it was reached.
            "until_accuracy": training_record.get("until_accuracy"),
            "hardware": training_record["hardware"],
            "evaluation": evaluation}


