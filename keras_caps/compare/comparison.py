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

import csv
import io
import json
import logging
import os
import warnings

import numpy as np

from keras_caps import training
from keras_caps.applications.capsule_classifier import (
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    STEM_NORMALIZATIONS,
)
from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_process
from keras_caps.compare import comparison_significance
from keras_caps.compare import comparison_statistics
from keras_caps.compare import comparison_tables
from keras_caps.compare import learning_curves
from keras_caps.compare import multi_digit_comparison
from keras_caps.compare import shards
from keras_caps.compare import user_data_comparison
from keras_caps.compare.model_runs import evaluation_settings
from keras_caps.compare.model_runs import finished_evaluation
from keras_caps.compare.model_runs import free_memory
from keras_caps.compare.model_runs import run_dir
from keras_caps.compare.model_runs import train_and_evaluate
from keras_caps.datasets import viewpoints as viewpoints_lib
from keras_caps.datasets.data_record import data_differences
from keras_caps.datasets.data_record import data_record
from keras_caps.datasets.user_dataset import is_user_dataset
from keras_caps.datasets.viewpoints import check_viewpoints
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation import robustness
from keras_caps.runs.atomic_files import write_atomically
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.atomic_files import write_text_atomically
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record
from keras_caps.training.backend_check import check_backend
from keras_caps.training.training_settings import PROTOCOLS
from keras_caps.training.training_settings import TrainingSettings
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice

# Comparison names -> `keras-caps train --model` names.
COMPARED_MODELS = {
    **{router: f"capsule_classifier_{router}" for router in ROUTERS},
    "cnn": "cnn_baseline",
    # The controls (docs/compare.md): the CNN ladder's steps 1 to 3 and
    # Sabour et al.'s baseline CNN.
    "cnn_positions": "cnn_positions",
    "cnn_vectors": "cnn_vectors",
    "cnn_vectors_decoder": "cnn_vectors",
    "sabour_cnn": "sabour_baseline_cnn",
}
# Models whose decoder is part of what they are: the CNNs have none, the
# CNN ladder's step 3 (`cnn_vectors_decoder`) is the step that adds it.
# Every other model has its decoder when the comparison's
# `reconstruction` says so.
FIXED_DECODERS = {"cnn": False, "cnn_positions": False,
                  "cnn_vectors": False, "cnn_vectors_decoder": True,
                  "sabour_cnn": False}
# Left out of the default models: Sabour et al.'s CNN (35.4 M parameters,
# for their affNIST protocol; name it to train it).
NOT_BY_DEFAULT = ("sabour_cnn",)


def default_models(reconstruction=True):
    """The models `compare` trains when none are named.

    Every key of `COMPARED_MODELS` but `NOT_BY_DEFAULT`, and without
    `reconstruction` but the CNN ladder's step with the decoder.

    Example:

    >>> "sabour_cnn" in default_models()
    False
    >>> "cnn_vectors_decoder" in default_models(reconstruction=False)
    False
    """
    return [name for name in COMPARED_MODELS
            if name not in NOT_BY_DEFAULT
            and (reconstruction or not FIXED_DECODERS.get(name, False))]


def model_reconstruction(name, reconstruction):
    """Whether the compared model `name` trains with a decoder, given the
    comparison's `reconstruction`."""
    return FIXED_DECODERS.get(name, reconstruction)


def _check_controls(routers, dataset, reconstruction):
    """Refuses a control that does not exist for the comparison: a model
    without a preset for `dataset`, or the ladder's decoder step in a
    comparison without reconstruction."""
    for name in routers:
        presets = training.MODELS[COMPARED_MODELS[name]].presets
        if dataset not in presets:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} has no "
                f"preset for {dataset!r}; it exists for {sorted(presets)}. "
                f"Drop it. Received: routers={routers!r}, "
                f"dataset={dataset!r}")
        if FIXED_DECODERS.get(name) and not reconstruction:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} is the "
                "CNN ladder's step that adds the decoder and its "
                "reconstruction loss, and a comparison without "
                "reconstruction (--no-reconstruction) trains no decoder. "
                "Drop it ('cnn_vectors' is the same model without). "
                f"Received: routers={routers!r}, reconstruction=False")


_SEVERITY_LABELS = {"noise": "noise std", "pixels": "pixels replaced",
                    "occlusion": "occluded side (px)"}
SETTINGS_FILE = "compare.json"
ISOLATIONS = ("process", "session")


def compare(routers=None, dataset="mnist", *, output_dir,
            seeds=(0, 1, 2, 3, 4), epochs=None, steps_per_epoch=None,
            batch_size=None, data_dir=None, validation="holdout",
            reconstruction=True, corruptions=None, evaluation_seed=1234,
            isolation="process", verbose=0, download=True, preset=None,
            read_options=None, reference=None, until_accuracy=None,
            workers=1, shard=None, adapt_batchnorm=False,
            stem_normalization="batch", viewpoints=None,
            attacks=None, partners_per_digit=None):
    """Trains and evaluates each router for each seed; writes the table.

    Args:
        routers: list of str. Keys of `COMPARED_MODELS` (the routers of
            `CapsuleClassifier`, `"cnn"` and the controls). Defaults to
            `default_models(reconstruction)`.
        dataset: str. A `CapsuleClassifier` preset: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"`, `"mnist_canvas"` or
            `"multi_mnist"` (two digits an image, scored per digit and by
            exact match: `keras_caps.compare.multi_digit_comparison`;
            needs `partners_per_digit`); or a
            dataset a user brings, `"folder:PATH"`, `"npz:PATH"` or
            `"tfds:NAME"` (clean accuracy only: no `corruptions`).
        output_dir: str. The comparison's folder.
        seeds: list of int. One model per router and seed. Defaults to
            `(0, 1, 2, 3, 4)` (fewer than 2: no interval and no
            across-seed test, see `keras_caps.evaluation.
            comparison_significance`).
        epochs, steps_per_epoch, batch_size: The recipe's budget, as in
            `keras_caps.training.train` (preset defaults: 150 epochs of the
            whole training split, batch 16).
        data_dir: str or `None`. The data folder (else
            `$KERAS_CAPS_DATA_DIR`, else TFDS). Recorded with its files'
            sizes and SHA-256 (or the TFDS dataset's version): resuming
            with other data is refused.
        download: bool. Without a data folder, let TFDS download the
            dataset if it is not prepared. Defaults to `True`.
        validation: str. `"holdout"` (default) or `"test"`.
        reconstruction: bool. Train the capsule models with their decoder
            (the CNNs have none, the CNN ladder's `cnn_vectors_decoder`
            always has one and is refused without reconstruction).
            Defaults to `True`.
        corruptions: dict or `None`; see
            `keras_caps.evaluation.robustness.check_corruptions`.
        evaluation_seed: int. Seeds the corruptions, the same for every
            model. Defaults to `1234`.
        isolation: str. `"process"` (default): each model trains and is
            evaluated in a process of its own, so the peak memory is one
            model's; the process dies with this one (see
            `keras_caps.compare.comparison_process`); `"session"`: in
            this process, after
            `keras.backend.clear_session()` (no process start-up, but
            memory grows by some megabytes per model).
        verbose: Keras `fit` verbosity. Defaults to `0`.
        preset: str or `None`. A user's dataset: the `CapsuleClassifier`
            preset every model trains with; `None`: the closest to its
            images (`keras_caps.training.model_recipe.closest_preset`).
        read_options: dict or `None`. A user's dataset: how to read it,
            `image_size`, `color_mode`, `test_dir`, `test_share` (see
            `keras_caps.training.train`).
        reference: str or `None`. The model every other one is tested
            against on every column (`keras_caps.evaluation.
            comparison_significance.reference_tests`); `None`: the first
            of `routers`. Only the report depends on it.
        until_accuracy: float in (0, 1) or `None`. Train each model until
            its holdout accuracy reaches it, at most `epochs` (Sabour et
            al. 2017, section 5.2: models compared at matched clean
            accuracy); each model's record says whether and at which epoch
            and step it was reached, and one that does not reach it is
            kept (selected at its best epoch) and marked. Recorded in
            `compare.json`; refused with `validation="test"` (see
            `TrainingSettings`).
        workers: int. Models trained at once, each in its own process
            (isolation="process"), on an equal share of the cores.
            Defaults to `1`.
        shard: `"K/N"`, `(K, N)` or `None`. Train only the K-th of N
            shares of the (model, seed) list (`keras_caps.evaluation.
            shards.shard_models`), so a job array fills one comparison
            folder from many machines; the table is written once every
            model is finished (by the last share, or a rerun without
            `shard`).
        adapt_batchnorm: bool. Also evaluate every model with its
            BatchNorm statistics re-estimated on each test set (see
            `keras_caps.evaluation.batchnorm_adaptation`). It changes no
            model: a finished comparison can be resumed with or without
            it (its models are evaluated again, not trained). Defaults to
            `False`.
        stem_normalization: str. `"batch"` (default) or `"group"`: every
            model's stem normalised by GroupNormalization instead of
            BatchNormalization (the builders' `stem_normalization`).
        viewpoints: `None`, `"azimuth"` or `"elevation"`: smallnorb only,
            the novel-viewpoint protocol of Hinton, Sabour & Frosst 2018,
            §5.1: every model trains on the training images of the
            familiar viewpoints and selects (and stops, with
            `until_accuracy`: models compared at matched familiar
            accuracy) on their holdout; the table adds the accuracy on the
            test images seen from the familiar and from the novel
            viewpoints (columns `"viewpoints:familiar"`,
            `"viewpoints:novel"`, see `keras_caps.datasets.smallnorb.
            load`). Recorded in `compare.json` when set.
        attacks: dict or `None`. Adversarial attacks on every model (see
            `keras_caps.evaluation.attack_evaluation.check_attacks`): one
            column per attack and epsilon, and, with `"cnn"` among the
            models and PGD epsilons, the transfer attack (PGD made on the
            `cnn` of the same seed; `keras_caps.evaluation.
            comparison_attacks`), and the gradient-masking checks of
            each model (`keras_caps.evaluation.attack_checks`). Like
            `adapt_batchnorm`, it changes no model: a finished comparison
            resumed with other attacks evaluates its models again, none is
            trained again. Defaults to `None`.
        partners_per_digit: int or `None`. `"multi_mnist"` only, and
            needed there: the test pairs per MNIST test digit (e.g. 10:
            100,000 pairs), of the models' test split and of their
            evaluation. Recorded in `compare.json`.

    Returns:
        dict: the `results.json` record (`"settings"` with `"data"`,
        `"models"` per run, `"routers"` aggregated over seeds,
        `"statistics"`: the tests against the reference,
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

    >>> results = compare(  # doctest: +SKIP
    ...     ["self_attention", "dynamic", "cnn"], "mnist",
    ...     output_dir="runs/compare", seeds=[0, 1], epochs=2,
    ...     corruptions={"noise": [0.1, 0.2, 0.4]})
    """
    if isolation not in ISOLATIONS:
        raise ValueError(
            f"Unknown `isolation`. Expected one of {list(ISOLATIONS)}. "
            f"Received: isolation={isolation!r}")
    if routers is None:
        routers = default_models(reconstruction)
    workers = shards.check_workers(workers, isolation)
    shard = shards.parse_shard(shard)
    # Every model trains with `train`: a backend it refuses is refused
    # before any data is read or the folder is claimed.
    check_backend("`keras-caps compare` (`keras_caps.compare.compare`)")
    check_viewpoints(dataset, viewpoints)
    # Checked before a user's dataset is read.
    attack_settings = _attack_settings(attacks, is_user_dataset(dataset))
    preset, user_data = _user_data(routers, dataset, corruptions, preset,
                                   read_options, data_dir, download)
    settings = _check_settings(
        routers, dataset, seeds, epochs, steps_per_epoch, batch_size,
        validation, reconstruction, corruptions, evaluation_seed, preset,
        until_accuracy)
    reference = _check_reference(reference, settings["routers"])
    if viewpoints is not None:  # Absent: the whole training split.
        settings["viewpoints"] = viewpoints
    settings.update(_multi_digit(dataset, partners_per_digit, attack_settings))
    settings.update(normalization_settings(
        adapt_batchnorm, stem_normalization, user_data is not None))
    settings.update(attack_settings)
    settings["data"] = (data_record(dataset, data_dir)
                        if user_data is None else user_data)
    # Refuses, before anything is written, a setting a model lacks (the
    # GroupNorm stem for `sabour_cnn`, ...).
    for router in settings["routers"]:
        training_settings(settings, router, settings["seeds"][0])
    _claim_output_dir(output_dir, settings)
    data_dir = _models_data_dir(settings, user_data, data_dir)
    models = [(router, seed) for router in settings["routers"]
              for seed in settings["seeds"]]
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
    _write_results(results, output_dir)
    return results


def _models_data_dir(settings, user_data, data_dir):
    """The data folder the models read, absolute: the user's dataset's
    own, else `data_dir` (`None`: the default)."""
    if user_data is not None:
        return settings["data"]["data_dir"]
    return None if data_dir is None else os.path.abspath(data_dir)


def _attack_settings(attacks, user_data):
    """`{"attacks": ...}` of the comparison's settings (checked), `{}`
    without attacks (as a comparison made before they existed)."""
    attacks = attack_evaluation.check_attacks(attacks)
    if attacks and user_data:
        raise ValueError(
            "The attacks read the built-in datasets' test sets; a "
            "comparison on a user's dataset measures clean accuracy only. "
            f"Drop them. Received: attacks={attacks!r}")
    return {"attacks": attacks} if attacks else {}


def _multi_digit(dataset, partners_per_digit, attack_settings):
    """`{"partners_per_digit": n}` of a MultiMNIST comparison's settings,
    checked (absent for other datasets, as before MultiMNIST was
    compared); see `keras_caps.compare.multi_digit_comparison`."""
    return multi_digit_comparison.comparison_settings(
        dataset, partners_per_digit, attack_settings.get("attacks"))


def _finished_model(settings, output_dir):
    """`finished(router, seed)`: whether a model is trained and
    evaluated with the comparison's evaluation settings."""
    evaluation = evaluation_settings(settings)

    def finished(router, seed):
        folder = run_dir(output_dir, router, seed)
        return (os.path.exists(os.path.join(folder, "metrics.json"))
                and finished_evaluation(folder, evaluation) is not None)

    return finished


def _user_data(routers, dataset, corruptions, preset, read_options,
               data_dir, download):
    """`(preset, data record)` of a dataset a user brings (read and
    checked here), `(preset, None)` for a built-in one."""
    if is_user_dataset(dataset):
        if corruptions and any(corruptions.values()):
            raise ValueError(
                "The corruptions read the built-in datasets' test sets; a "
                f"comparison on {dataset} measures clean accuracy only. "
                f"Drop them. Received: corruptions={corruptions!r}")
        return user_data_comparison.read_comparison_data(
            COMPARED_MODELS[_check_routers(routers)[0]], dataset, preset,
            read_options, data_dir=data_dir, download=download)
    if preset is not None or any((read_options or {}).values()):
        raise ValueError(
            "`preset` and `read_options` (--preset, --image-size, "
            "--color-mode, --test-dir, --test-share) apply to datasets a "
            f"user brings only; {dataset!r} has its own. Received: "
            f"preset={preset!r}, read_options={read_options!r}")
    return preset, None


def _write_results(results, output_dir):
    """Adds the learning curves to `results`, then writes the table
    (`results.json`, `.csv`, `.md`) and the plots."""
    settings = results["settings"]
    results["learning_curves"] = learning_curves.learning_curves(
        {router: {seed: run_dir(output_dir, router, seed)
                  for seed in settings["seeds"]}
         for router in settings["routers"]})
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
    return {"settings": settings,
            "models": [run for run in runs if run is not None],
            "unfinished": unfinished}


def _check_settings(routers, dataset, seeds, epochs, steps_per_epoch,
                    batch_size, validation, reconstruction, corruptions,
                    evaluation_seed, preset=None, until_accuracy=None):
    """The comparison's settings (`compare.json`), checked and resolved;
    `preset`: that of a user's dataset (then recorded; user data is scored
    on clean test images only)."""
    routers = _check_routers(routers)
    seeds = _check_seeds(seeds)
    if preset is None and dataset not in CAPSULE_CLASSIFIER_PRESETS:
        raise ValueError(
            "Unknown `dataset`. Expected one of "
            f"{sorted(CAPSULE_CLASSIFIER_PRESETS)}. Received: "
            f"dataset={dataset!r}")
    _check_controls(routers, preset or dataset, reconstruction)
    # The recipe's fields are those of each model's `TrainingSettings`,
    # checked as such.
    recipe = TrainingSettings(
        COMPARED_MODELS[routers[0]], dataset, epochs=epochs,
        steps_per_epoch=steps_per_epoch, batch_size=batch_size,
        validation=validation, preset=preset, until_accuracy=until_accuracy)
    if preset is not None:
        recipe.resolve()  # Refuses a preset the compared models lack.
        corruptions = dict(user_data_comparison.NO_CORRUPTIONS)
    else:
        corruptions = robustness.check_corruptions(dataset, corruptions)
    defaults = CAPSULE_CLASSIFIER_PRESETS[preset or dataset]
    settings = {
        "routers": routers, "dataset": dataset, "seeds": seeds,
        "epochs": defaults["epochs"] if epochs is None else recipe.epochs,
        "steps_per_epoch": recipe.steps_per_epoch,
        "batch_size": defaults["batch_size"] if batch_size is None
        else recipe.batch_size,
        "validation": validation,
        "reconstruction": bool(reconstruction),
        "corruptions": corruptions,
        "evaluation_seed": int(evaluation_seed),
    }
    if preset is not None:
        settings["preset"] = preset
    if recipe.until_accuracy is not None:  # Absent: no target (as before).
        settings["until_accuracy"] = recipe.until_accuracy
    return settings


NORMALIZATION_DEFAULTS = {"adapt_batchnorm": False,
                          "stem_normalization": "batch"}


def normalization_settings(adapt_batchnorm, stem_normalization,
                           user_data=False):
    """The comparison's `adapt_batchnorm` and `stem_normalization`
    settings, checked (a user's dataset is evaluated on clean images
    only, so without adaptation)."""
    check_bool("adapt_batchnorm", adapt_batchnorm)
    check_choice("stem_normalization", stem_normalization,
                 STEM_NORMALIZATIONS)
    if adapt_batchnorm and user_data:
        raise ValueError(
            "`adapt_batchnorm` (--adapt-batchnorm) re-estimates BatchNorm "
            "statistics on the built-in datasets' corrupted test sets; a "
            "comparison on a user's dataset measures clean accuracy only. "
            "Drop it. Received: adapt_batchnorm=True")
    return {"adapt_batchnorm": adapt_batchnorm,
            "stem_normalization": stem_normalization}


def with_normalization_defaults(settings):
    """A `compare.json` record with `NORMALIZATION_DEFAULTS` for the keys
    an earlier keras_caps did not write (its models have BatchNorm stems
    and its evaluations no adaptation)."""
    if not isinstance(settings, dict):
        return settings
    return {**NORMALIZATION_DEFAULTS, **settings}


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


def _check_reference(reference, routers):
    """The model the others are tested against: `reference`, else the
    first of `routers`."""
    if reference is None:
        return routers[0]
    if reference not in routers:
        raise ValueError(
            "Received an invalid value for `reference`, expected one of the "
            f"compared models {routers}. Received: reference={reference!r}")
    return reference


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
    user_data = {}
    if "preset" in settings:  # A user's dataset, read as recorded.
        user_data = {"preset": settings["preset"],
                     "data_source": settings["data"]["source"]}
    return TrainingSettings(
        COMPARED_MODELS[router], settings["dataset"],
        epochs=settings["epochs"],
        steps_per_epoch=settings["steps_per_epoch"],
        batch_size=settings["batch_size"], seed=seed,
        validation=settings["validation"],
        # The CNNs have no decoder, the ladder's step 3 always has one.
        reconstruction=model_reconstruction(router,
                                            settings["reconstruction"]),
        until_accuracy=settings.get("until_accuracy"), **user_data,
        **_stem_option(settings), **_viewpoint_option(settings),
        **multi_digit_comparison.dataset_options(settings))


def _viewpoint_option(settings):
    """The models' loader option `viewpoints` when the comparison has one
    (records without it read as before)."""
    if settings.get("viewpoints") is None:
        return {}
    return {"dataset_options": {"viewpoints": settings["viewpoints"]}}


def _stem_option(settings):
    """`stem_normalization` of the models, unless the default (`"batch"`,
    which their records leave out, as before the option existed)."""
    stem_normalization = settings.get("stem_normalization", "batch")
    if stem_normalization == "batch":
        return {}
    return {"stem_normalization": stem_normalization}


def _claim_output_dir(output_dir, settings):
    """Writes `compare.json`, or refuses a folder made with another recipe
    or other data.

    The routers may differ from the folder's: a comparison can be
    extended with a router (only its models train) or reported for a
    subset; every other setting, and the data, must be the same.
    """
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.exists(path):
        previous = _read_record(
            path, "It holds the comparison's settings: restore it, or use "
            "another --output-dir. Nothing was overwritten.")
        current = json.loads(json.dumps(settings))
        # `adapt_batchnorm` and the attacks change evaluations only:
        # they may differ (the models are evaluated again).
        recipe = {key: value for key, value in
                  with_normalization_defaults(previous).items()
                  if key != "attacks"}
        _check_same_comparison(output_dir, {
            **recipe, "adapt_batchnorm": current["adapt_batchnorm"],
            **({"attacks": current["attacks"]} if "attacks" in current
               else {})}, current)
        if previous != current:
            write_json_atomically(path, settings)
        return
    if os.path.isdir(output_dir) and _entries(output_dir):
        if os.path.exists(path):  # Another share claimed it meanwhile.
            return _claim_output_dir(output_dir, settings)
        raise ValueError(
            f"{output_dir!r} is not empty and holds no {SETTINGS_FILE}: "
            "it is not a comparison folder; nothing was overwritten. "
            "Choose an empty or new --output-dir.")
    os.makedirs(output_dir, exist_ok=True)
    if not _create_record(path, settings):  # Another share was first.
        _claim_output_dir(output_dir, settings)


def _entries(folder):
    """The names in `folder` but the temporary files of a write under
    way (another share's `compare.json`)."""
    return [name for name in os.listdir(folder)
            if not name.startswith(".tmp-")]


def _create_record(path, record):
    """Writes the JSON `record` at `path` unless a file is there (shares
    starting at once: one writes it, the others compare with it); returns
    whether it wrote."""
    temporary = os.path.join(os.path.dirname(path),
                             f".tmp-{os.getpid()}-new-{os.path.basename(path)}")
    write_json_atomically(temporary, record)
    try:
        os.link(temporary, path)  # Atomic, and fails when `path` exists.
        return True
    except FileExistsError:
        return False
    except OSError:  # A file system without hard links: a plain write.
        write_json_atomically(path, record)
        return True
    finally:
        os.remove(temporary)


def _check_same_comparison(output_dir, previous, current):
    """Refuses to resume the comparison `previous` (its `compare.json`)
    with the `current` settings unless they match (but for the routers)."""
    if "data" not in previous:
        raise ValueError(
            f"{os.path.join(output_dir, SETTINGS_FILE)!r} was written by an "
            "earlier keras_caps that did not record the comparison's data "
            "(data folder and files), so its models cannot be checked "
            "against this data: the folder is neither resumed nor "
            "extended, and nothing was overwritten. Use another "
            "--output-dir.")
    data = previous["data"]
    if isinstance(data, dict) and "source" not in data and "data_dir" in data:
        raise ValueError(
            f"{os.path.join(output_dir, SETTINGS_FILE)!r} records its data "
            "by folder path (a development version of keras_caps), not by "
            "the files' content as keras_caps now does, so its models "
            "cannot be checked against this data: the folder is neither "
            "resumed nor extended, and nothing was overwritten. Use another "
            "--output-dir.")
    differing = _differences(
        {**previous, "routers": None, "data": None},
        {**current, "routers": None, "data": None})
    differing += _data_changes(previous["data"], current["data"])
    if differing:
        raise ValueError(
            f"{output_dir!r} holds a comparison made with other settings "
            f"or data (differing: {'; '.join(differing)}); nothing was "
            "overwritten. Use another --output-dir, or the same settings "
            "and data (any routers) to resume or extend it.")


def _data_changes(previous, current):
    """What differs between two data records, a phrase each."""
    if previous == current:
        return []
    if all(isinstance(data, dict) and "source" not in data
           for data in (previous, current)):  # Built-in datasets.
        return [f"data: {change}"
                for change in data_differences(previous, current)]
    return _differences({"data": previous}, {"data": current})


def _differences(previous, current, prefix=""):
    """`"<key>: <previous> before, <current> now"` for each differing
    entry of two records, nested keys dotted."""
    found = []
    for key in sorted(set(previous) | set(current)):
        old, new = previous.get(key, _ABSENT), current.get(key, _ABSENT)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            found += _differences(old, new, f"{prefix}{key}.")
        else:
            found.append(f"{prefix}{key}: {_short(old)} before, "
                         f"{_short(new)} now")
    return found


_ABSENT = object()


def _short(value, limit=70):
    text = "absent" if value is _ABSENT else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _read_record(path, advice):
    """The JSON record `path`; an unreadable one is a `ValueError` naming
    the file, followed by `advice`."""
    try:
        return read_json_record(path)
    except UnreadableRecordError as error:
        raise ValueError(f"{error} {advice}") from None


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
                      "settings": training_settings(settings, router, seed),
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
    training_record = _read_record(
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
            **_run_costs(training_record, isolation,
                         (router, seed) not in trained_now),
            "selected_epoch": training_record["selected_epoch"],
            # Trained until an accuracy: whether and where it was reached.
            "until_accuracy": training_record.get("until_accuracy"),
            "hardware": training_record["hardware"],
            "evaluation": evaluation}


def columns(settings):
    """`(key, title)` of each accuracy column: clean, then corruptions."""
    result = [("clean", "clean")]
    if settings.get("viewpoints") is not None:  # Hinton et al. 2018.
        result += [(key, f"{key.split(':')[1]} viewpoints")
                   for key in predictions_lib.VIEWPOINT_KEYS]
    corruptions = settings["corruptions"]
    for kind in ("noise", "pixels", "occlusion"):
        for severity in corruptions[kind]:
            result.append((f"{kind}:{severity}",
                           f"{_SEVERITY_LABELS[kind]} {severity}"))
    if corruptions["affine"]:
        result.append(("affine", "affNIST (Tieleman)"
                       if corruptions.get("affnist_dir")
                       else "affine (generated)"))
    if corruptions.get("translated"):
        result.append(("translated", "translated"))
    result += attack_evaluation.attack_columns(
        settings.get("attacks"),
        comparison_attacks.transfer_enabled(settings))
    return result + multi_digit_comparison.exact_match_columns(settings,
                                                               result)


def _accuracy(evaluation, key):
    if key == "clean":
        return evaluation["clean"]["accuracy"]
    if key in ("affine", "translated"):
        return evaluation[key]
    if multi_digit_comparison.is_exact_match(key):  # MultiMNIST.
        return multi_digit_comparison.accuracy(evaluation, key)
    kind, severity = key.split(":")
    return evaluation[kind][severity]


def _mean_std(values):
    """The mean, the sample std (0 for one value) and the 95 % Student-t
    interval of accuracies (`low`, `high`: `None` for one value).

    The t interval is symmetric and unbounded; an accuracy is not, so
    with few seeds and a wide spread near 0 or 1 it would reach past
    them: it is cut at [0, 1].
    """
    values = np.asarray(values, dtype="float64")
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    interval = comparison_statistics.mean_interval(
        values, comparison_significance.CONFIDENCE)
    low, high = interval["low"], interval["high"]
    if low is not None:
        low, high = max(low, 0.0), min(high, 1.0)
    return {"mean": float(values.mean()), "std": std,
            "low": low, "high": high}


def results_record(runs, settings, reference=None):
    """The `results.json` record of finished `runs`.

    Args:
        runs: list of dict. One per model (`_model_record`'s records).
        settings: dict. The comparison's settings.
        reference: str or `None`. The model the others are tested against
            (`None`: the first router).

    Example:

    ```python
    results = results_record(runs, settings, reference="dynamic")
    ```
    """
    aggregated = _aggregate(runs, settings)
    reference = _check_reference(reference, settings["routers"])
    for row in aggregated.values():
        # Of the mean accuracies; `None` without a clean error (JSON has
        # no infinity).
        ratios = {key: comparison_statistics.relative_corruption_error(
            row["accuracy"][key]["mean"],
            row["accuracy"][multi_digit_comparison.clean_key(key)]["mean"])
            for key, _ in columns(settings)[1:]
            if key not in predictions_lib.VIEWPOINT_KEYS
            and key != multi_digit_comparison.clean_key(key)}
        row["relative_corruption_error"] = {
            key: None if ratio is None or np.isinf(ratio) else ratio
            for key, ratio in ratios.items()}
    return {"settings": settings, "models": runs, "routers": aggregated,
            "statistics": comparison_significance.reference_tests(
                aggregated, runs, reference,
                [key for key, _ in columns(settings)])}


def _aggregate(runs, settings):
    """Per router: means, sample standard deviations and 95 % intervals
    over seeds, and the per-seed values (`"per_seed"`).

    `"train_ms_per_step"` is the mean over the seeds whose speed is known
    (`"speed_seeds"`), `None` when none is.
    """
    aggregated = {}
    for router in settings["routers"]:
        mine = [run for run in runs if run["router"] == router]
        evaluations = [run["evaluation"] for run in mine]
        timed = [run for run in mine if run["train_ms_per_step"] is not None]
        aggregated[router] = {
            "num_seeds": len(mine),
            "trainable_parameters": evaluations[0]["trainable_parameters"],
            "accuracy": {key: _mean_std([_accuracy(e, key)
                                         for e in evaluations])
                         for key, _ in columns(settings)},
            "macro_accuracy": _mean_std(
                [e["clean"]["macro_accuracy"] for e in evaluations]),
            "train_ms_per_step": float(np.mean(
                [run["train_ms_per_step"] for run in timed]))
            if timed else None,
            "speed_seeds": [run["seed"] for run in timed],
            "images_per_second": float(np.mean(
                [e["clean"]["images_per_second"] for e in evaluations])),
            "per_seed": {
                "seeds": [run["seed"] for run in mine],
                "accuracy": {key: [_accuracy(e, key) for e in evaluations]
                             for key, _ in columns(settings)},
                "macro_accuracy": [e["clean"]["macro_accuracy"]
                                   for e in evaluations]},
            **_aggregate_costs(mine, evaluations),
        }
        aggregated[router].update(_normalization_summary(evaluations,
                                                         settings))
        aggregated[router].update(comparison_attacks.masking_summary(
            evaluations, settings))
    return aggregated


def _run_costs(training_record, isolation, trained_before):
    """A run's steady speed and peak memory, from its `metrics.json`.

    `None` where the record (written by an earlier keras_caps) lacks them.
    The peak memory is the training process's: one model's under process
    isolation (`"peak_memory_per_model": True`), the whole session's so
    far under session isolation (`False`), unknown for a model trained by
    an earlier command (`None`).
    """
    per_model = None
    if not trained_before:
        per_model = isolation == "process"
    return {"steady_ms_per_step": training_record.get("steady_ms_per_step"),
            "steady_steps": training_record.get("steady_steps", 0),
            "peak_memory_mb": training_record.get("peak_memory_mb"),
            "peak_memory_per_model": per_model}


def _aggregate_costs(runs, evaluations):
    """A router's costs over its seeds (new keys of `_aggregate`).

    Parameters and multiply–adds are the first seed's (the same for every
    seed; `None` in evaluations written by an earlier keras_caps); the
    steady ms/step is the mean over the seeds that timed steps
    (`"steady_speed_seeds"`), the peak memory the largest over the seeds
    that recorded it, per model only if every seed's was.
    """
    first = evaluations[0]
    timed = [run for run in runs if run.get("steady_ms_per_step") is not None]
    measured = [run for run in runs if run.get("peak_memory_mb") is not None]
    return {
        "trainable_parameters_with_decoder": first.get(
            "trainable_parameters_with_decoder"),
        "decoder_parameters": first.get("decoder_parameters"),
        "multiply_adds": first.get("multiply_adds"),
        "decoder_multiply_adds": first.get("decoder_multiply_adds"),
        "steady_ms_per_step": float(np.mean(
            [run["steady_ms_per_step"] for run in timed])) if timed else None,
        "steady_speed_seeds": [run["seed"] for run in timed],
        "peak_memory_mb": max(run["peak_memory_mb"] for run in measured)
        if measured else None,
        "peak_memory_per_model": bool(measured) and all(
            run.get("peak_memory_per_model") is True for run in measured),
    }


def _normalization_summary(evaluations, settings):
    """Per column key, mean and std over seeds of the majority share and,
    with `adapt_batchnorm`, of the adapted accuracy and majority share;
    nothing for evaluations without them (a user's dataset)."""
    if not all("majority_share" in e for e in evaluations):
        return {}
    keys = [key for key, _ in columns(settings)]
    summary = {"majority_share": {
        key: _mean_std([e["majority_share"][key] for e in evaluations])
        for key in keys}}
    if settings.get("adapt_batchnorm"):
        for name in ("accuracy", "majority_share"):
            summary[f"adapted_{name}"] = {
                key: _mean_std([e["adapted"][name][key]
                                for e in evaluations]) for key in keys}
    return summary



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
    header += _csv_statistics_header(settings)
    header += comparison_tables.csv_header(columns(settings))
    header += ["masking_checks"] if settings.get("attacks") else []
    writer.writerow(header)
    for router, row in results["routers"].items():
        speed = row["train_ms_per_step"]
        values = [router, row["trainable_parameters"],
                  "nan" if speed is None else f"{speed:.3f}",
                  f"{row['images_per_second']:.1f}",
                  repr(row["macro_accuracy"]["mean"]),
                  repr(row["macro_accuracy"]["std"])]
        for key, _ in columns(settings):
            values += [repr(row["accuracy"][key]["mean"]),
                       repr(row["accuracy"][key]["std"])]
        values += _csv_statistics(results, router)
        values += comparison_tables.csv_cells(row, columns(settings))
        if settings.get("attacks"):
            values.append("pass" if row["masking_checks"]["passed"]
                          else "fail")
        writer.writerow(values)
    return output.getvalue()


_CSV_TESTS = ("difference", "t_p", "t_p_holm", "sign_flip_p",
              "mcnemar_p_max")


def _csv_statistics_header(settings):
    """The interval and test columns, after the means and stds: per
    column key, the 95 % interval's bounds; the difference from the
    reference, the t-test's p-value, raw and Holm-corrected, the
    sign-flip p-value and the largest McNemar p-value over the seeds."""
    header = []
    for key, _ in columns(settings):
        header += [f"{key}_low", f"{key}_high"]
    for key, _ in columns(settings):
        header += [f"{key}_{name}" for name in _CSV_TESTS]
    return header


def _csv_statistics(results, router):
    """`router`'s cells of `_csv_statistics_header` ("" where none: no
    interval, the reference's own tests, an earlier results.json)."""
    settings = results["settings"]
    row = results["routers"][router]
    values = []
    for key, _ in columns(settings):
        values += [_csv_number(row["accuracy"][key].get(bound))
                   for bound in ("low", "high")]
    tests = (results.get("statistics") or {}).get("models", {}).get(router)
    for key, _ in columns(settings):
        if tests is None:
            values += [""] * len(_CSV_TESTS)
            continue
        cell = tests[key]
        mcnemar = [result["p_value"] for result in cell["mcnemar"]
                   if result is not None]
        values += [_csv_number(value) for value in (
            cell["difference"]["mean"], cell["t_test"]["p_value"],
            cell["t_p_holm"], (cell["sign_flip"] or {}).get("p_value"),
            max(mcnemar) if mcnemar else None)]
    return values


def _csv_number(value):
    return "" if value is None else repr(float(value))


def results_markdown(results):
    """The table as Markdown, with the protocol it was measured under."""
    settings = results["settings"]
    runs = results["models"]
    hardware = runs[0]["hardware"] if runs else "unknown"
    steps = ("all" if settings["steps_per_epoch"] is None
             else settings["steps_per_epoch"])
    lines = [
        f"Dataset `{settings['dataset']}` "
        f"({_data_text(settings.get('data'))})"
        f", {len(settings['seeds'])} seeds "
        f"{settings['seeds']}, "
        f"{'at most ' if settings.get('until_accuracy') else ''}"
        f"{settings['epochs']} epochs of {steps} "
        f"steps, batch {settings['batch_size']}, one recipe "
        f"(Efficient-CapsNet's optimizer and schedule), model selection: "
        f"{PROTOCOLS[settings['validation']]}; capsule models "
        f"{'with' if settings['reconstruction'] else 'without'} their "
        f"decoder. Test accuracy in %, mean over seeds [95 % interval]; "
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
    statistics = results.get("statistics") or {}
    for router, row in results["routers"].items():
        tests = statistics.get("models", {}).get(router, {})
        name = (f"{router} (reference)"
                if router == statistics.get("reference") else router)
        name += attack_checks.row_mark(row)
        cells = [name, f"{row['trainable_parameters']:,}",
                 _speed_cell(row),
                 f"{row['images_per_second']:.0f}",
                 comparison_significance.accuracy_cell(
                     row["macro_accuracy"])]
        cells += [comparison_significance.accuracy_cell(
            row["accuracy"][key], tests.get(key, {}).get("holds", False))
            for key, _ in columns(settings)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _speed_notes(results["routers"])
    lines += attack_checks.masking_markdown(results["routers"])
    lines += comparison_attacks.vote_note(settings, runs)
    lines += comparison_attacks.subset_note(settings)
    lines += comparison_tables.costs_markdown(results["routers"])
    lines += comparison_tables.collapse_markdown(results["routers"],
                                                 columns(settings))
    lines += comparison_significance.statistics_markdown(
        results, columns(settings))
    lines += learning_curves.until_accuracy_notes(results)
    lines += _viewpoint_notes(results)
    lines += multi_digit_comparison.notes(results)
    return "\n".join(lines) + "\n"


def _viewpoint_notes(results):
    """What the viewpoint columns hold, and each model's error on the
    novel viewpoints over its error on the familiar ones (Hinton et al.
    2018, section 5.1, Table 2 compares these errors); none without
    `viewpoints`."""
    viewpoints = results["settings"].get("viewpoints")
    if viewpoints is None:
        return []
    familiar = ", ".join(str(angle) for angle in viewpoints_lib.degrees(
        viewpoints, viewpoints_lib.FAMILIAR_LABELS[viewpoints]))
    lines = ["", f"Viewpoints ({viewpoints}; Hinton, Sabour & Frosst 2018, "
             f"section 5.1): every model trained on the training images "
             f"seen from the {viewpoints}s {familiar} degrees and was "
             "selected on a holdout of them; `clean` is the whole test "
             "set (other object instances), `familiar viewpoints` its "
             "images from those angles and `novel viewpoints` the others. "
             "Error on novel / familiar viewpoints (of the mean "
             "accuracies):", ""]
    for router, row in results["routers"].items():
        ratio = comparison_statistics.relative_corruption_error(
            row["accuracy"]["viewpoints:novel"]["mean"],
            row["accuracy"]["viewpoints:familiar"]["mean"])
        text = ("n/a (no familiar error)" if ratio is None
                else "∞" if np.isinf(ratio) else f"{ratio:.2f}")
        lines.append(f"- {router}: {text}")
    return lines


def _data_text(data):
    if data is None:  # A results.json of an earlier keras_caps.
        return "data not recorded"
    if "source" in data:  # A user's dataset.
        source = data["source"]
        return (f"{source['num_train']} training and {source['num_test']} "
                f"test images, {source['image_size'][0]}x"
                f"{source['image_size'][1]} {source['color_mode']}, "
                f"{len(source['class_names'])} classes")
    if "tfds" in data:
        tfds_data = data["tfds"]
        where = (tfds_data.get("data_dir", data.get("data_dir"))
                 or "the default TFDS data directory")
        return (f"TFDS {tfds_data['name']} {tfds_data['version']} "
                f"from {where}")
    if "data_dir" in data:  # The path-based record of a development version.
        return f"IDX files of {data['data_dir']}"
    digests = ", ".join(f"{name} {fingerprint['sha256'][:12]}"
                        for name, fingerprint in sorted(data["files"].items()))
    return f"IDX files (SHA-256 {digests})"


def _speed_cell(row):
    speed = row["train_ms_per_step"]
    if speed is None:
        return "n/a"
    partial = len(row.get("speed_seeds", ())) < row["num_seeds"]
    return f"{speed:.1f}" + ("*" if partial else "")


def _speed_notes(rows):
    """Footnotes for the ms/step cells that are not over every seed."""
    if all(len(row.get("speed_seeds", ())) == row["num_seeds"]
           for row in rows.values()):
        return []
    return ["", "ms/step n/a: no seed's `metrics.json` records the optimizer "
            "steps of its last training process (`train_steps_this_run`: "
            "written by an earlier keras_caps, or no step taken); * : the "
            "mean over the seeds that record them."]


def plot_accuracy_vs_severity(results, path, dpi=100):
    """Accuracy against severity, one panel per corruption kind.

    One line per router (the mean over seeds) with a +-std band; severity 0
    is the clean accuracy. Raises `ImportError` without matplotlib.
    """
    from keras_caps.visualization import _figures

    settings = results["settings"]
    kinds = [kind for kind in ("noise", "pixels", "occlusion")
             if settings["corruptions"][kind]]
    figure = _figures.new_figure(
        4.0 * max(len(kinds), 1) + _figures.LEGEND_WIDTH, 3.2)
    axes = figure.subplots(1, max(len(kinds), 1), squeeze=False)[0]
    for axis, kind in zip(axes, kinds or [None], strict=True):
        for index, (router, row) in enumerate(results["routers"].items()):
            severities = [0] + list(settings["corruptions"].get(kind) or [])
            keys = ["clean"] + [f"{kind}:{s}" for s in severities[1:]]
            mean = np.array([row["accuracy"][k]["mean"] for k in keys])
            std = np.array([row["accuracy"][k]["std"] for k in keys])
            style = _figures.series_style(index)
            axis.plot(severities, 100 * mean, marker="o", label=router,
                      **style)
            axis.fill_between(severities, 100 * (mean - std),
                              100 * (mean + std), color=style["color"],
                              alpha=0.1)
        axis.set_xlabel(_SEVERITY_LABELS.get(kind, "severity"))
        axis.set_ylabel("test accuracy (%)")
        axis.set_title(kind or "clean")
        axis.grid(alpha=0.3)
    _figures.legend_beside(figure, axes[0])
    write_atomically(path, lambda temporary: figure.savefig(temporary,
                                                            dpi=dpi))
    return path
