"""The attacks of `keras-caps compare`: the transfer attack and the
gradient-masking checks of each row.

With attacks (`compare(attacks=...)`, see
`keras_caps.evaluation.attack_evaluation`), every model is attacked
white-box in its own evaluation (`robustness.json`). When the CNN
baseline (`"cnn"`) is among the compared models and PGD epsilons are
given, its PGD perturbations are also a black-box attack on every model
of the same seed (a transfer attack: Papernot et al. 2016; a reference
that gradient masking cannot weaken, Athalye et al. 2018, section 3.1):
once every model of a seed is finished, `evaluate_transfers` makes the
perturbations once on that seed's `cnn` model (the same PGD settings and
random starts as its white-box PGD, so for `cnn` itself the transfer is
its white-box attack) and classifies them with each model, writing

- `models/<model>_seed<seed>/transfer.json`: `{"settings": ...,
  "transfer_pgd": {epsilon: accuracy}, "majority_share": {...}}` (and
  `"adapted"` with `adapt_batchnorm`), the settings naming the source
  model by the SHA-256 of its `model.keras` (a CNN trained again makes
  them stale: computed again);
- `"transfer_pgd:<epsilon>"` (and `"adapted:transfer_pgd:<epsilon>"`)
  added to the model's `predictions.npz`, so the per-image tests cover the
  transfer columns too.

With `"attack_images"` (the first N test images only), the transfer
perturbations are made for those N images, and their classes are
`"labels:attacks"` in `predictions.npz`.

`masking_summary` gives each row the checks of
`keras_caps.evaluation.attack_checks` over its seeds.
"""

import hashlib
import logging
import os

import keras
import numpy as np

from keras_caps.compare.comparison_settings import ComparisonSettings
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.record_files import read_record_made_with

TRANSFER_SOURCE = "cnn"
TRANSFER_FILE = "transfer.json"
TRANSFER = "transfer_pgd"


def transfer_enabled(settings):
    """Whether the comparison `settings` have a transfer attack: PGD
    epsilons, and `"cnn"` among the models."""
    attacks = settings.attacks
    return bool(attacks and attacks["pgd"]
                and TRANSFER_SOURCE in settings.routers)


def _transfer_settings(settings, source_digest):
    attacks = settings.attacks
    return {"source": TRANSFER_SOURCE, "source_sha256": source_digest,
            "pgd": attacks["pgd"], "pgd_steps": attacks["pgd_steps"],
            "pgd_restarts": attacks["pgd_restarts"],
            "loss": attacks["loss"], "seed": settings.evaluation_seed,
            "adapt_batchnorm": settings.adapt_batchnorm,
            "data": settings.data,
            # Only when given: transfers made before it stay current.
            **({"attack_images": attacks["attack_images"]}
               if attacks.get("attack_images") is not None else {})}


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def finished_transfer(folder, expected):
    """The model's `transfer.json` if made with the `expected` settings
    and its predictions are in `predictions.npz`; else `None`."""
    record = read_record_made_with(
        os.path.join(folder, TRANSFER_FILE), expected,
        "The transfer attack is evaluated again.")
    if record is None:
        return None
    try:
        saved = predictions_lib.read_predictions(folder)
    except (OSError, ValueError):
        return None
    keys = [f"{TRANSFER}:{epsilon}" for epsilon in expected["pgd"]]
    if any(key not in saved for key in keys):
        return None
    return record


def transfer_record(settings, output_dir, router, seed, run_dir):
    """The transfer entries of one model's evaluation, or `None` when
    they are not made yet (or the comparison has no transfer attack:
    then `{}`)."""
    if not transfer_enabled(settings):
        return {}
    source = os.path.join(run_dir(output_dir, TRANSFER_SOURCE, seed),
                          "model.keras")
    if not os.path.exists(source):
        return None
    return finished_transfer(run_dir(output_dir, router, seed),
                             _transfer_settings(settings, _sha256(source)))


def evaluate_transfers(settings, output_dir, models, run_dir, options):
    """Makes the transfer attack of each seed whose models are finished
    and classifies it with each model lacking it (see the module
    docstring).

    Args:
        settings: dict. The comparison's settings.
        output_dir: str. The comparison's folder.
        models: list of `(router, seed)`; those finished (`finished(router,
            seed)`) are evaluated.
        run_dir: `keras_caps.compare.model_runs.run_dir`.
        options: `(finished, data_dir, download)`: `finished(router,
            seed)` says whether a model is trained and evaluated.
    """
    if not transfer_enabled(settings):
        return
    finished, data_dir, download = options
    for seed in sorted({seed for _, seed in models}):
        source = run_dir(output_dir, TRANSFER_SOURCE, seed)
        if not finished(TRANSFER_SOURCE, seed):
            continue
        expected = _transfer_settings(
            settings, _sha256(os.path.join(source, "model.keras")))
        missing = [router for router, model_seed in models
                   if model_seed == seed and finished(router, seed)
                   and finished_transfer(run_dir(output_dir, router, seed),
                                         expected) is None]
        if not missing:
            continue
        logging.info("seed %d: the transfer attack (PGD on cnn) on %s",
                     seed, ", ".join(missing))
        _transfer_seed(settings, expected, source,
                       [run_dir(output_dir, router, seed)
                        for router in missing], (data_dir, download))


def _transfer_seed(settings, expected, source, folders, options):
    """The transfer images of one seed, made on `source`, classified by
    the models of `folders`."""
    from keras_caps.evaluation import robustness

    data_dir, download = options
    # The test images of the models' evaluations (their seed places the
    # mnist_canvas digits).
    images, labels = robustness.load_test_arrays(
        settings.dataset, data_dir=data_dir,
        seed=settings.evaluation_seed, download=download)
    images, labels = attack_evaluation.attack_subset(settings.attacks,
                                                     images, labels)
    cnn = robustness.classifier(keras.saving.load_model(
        os.path.join(source, "model.keras")))
    attacked = {epsilon: attack_evaluation.adversarial_set(
        cnn, images, labels, settings.attacks, TRANSFER, epsilon,
        settings.evaluation_seed) for epsilon in expected["pgd"]}
    del cnn
    keras.backend.clear_session()
    for folder in folders:
        model = robustness.classifier(keras.saving.load_model(
            os.path.join(folder, "model.keras")))
        _classify_transfer(model, folder, attacked, labels, expected)
        del model
        keras.backend.clear_session()


def _classify_transfer(predictor, folder, attacked, labels, expected):
    """Writes one model's `transfer.json` and adds its predictions to
    `predictions.npz`."""
    from keras_caps.evaluation import batchnorm_adaptation

    saved = predictions_lib.read_predictions(folder)
    # The attacked images' classes: "labels:attacks" for a subset.
    labels_key = predictions_lib.labels_of(TRANSFER + ":", saved)
    if not np.array_equal(saved[labels_key], labels):
        raise ValueError(
            f"{folder!r}: its predictions.npz holds other test images than "
            "the transfer attack's; evaluate the model again (move its "
            "robustness.json away).")
    record = {"settings": expected, TRANSFER: {}, "majority_share": {}}
    adapted = {"accuracy": {}, "majority_share": {}}
    for epsilon, images in attacked.items():
        key = f"{TRANSFER}:{epsilon}"
        saved[key] = _predict(predictor, images)
        record[TRANSFER][str(epsilon)] = float(np.mean(saved[key] == labels))
        record["majority_share"][key] = predictions_lib.majority_share(
            saved[key])
        if expected["adapt_batchnorm"]:
            with batchnorm_adaptation.adapted_batchnorm(
                    predictor, images) as layers:
                predicted = (_predict(predictor, images) if layers
                             else saved[key])
            saved[predictions_lib.ADAPTED_PREFIX + key] = predicted
            adapted["accuracy"][key] = float(np.mean(predicted == labels))
            adapted["majority_share"][key] = (
                predictions_lib.majority_share(predicted))
    if expected["adapt_batchnorm"]:
        record["adapted"] = adapted
    predictions_lib.write_predictions(folder, saved,
                                      predictor.output_shape[-1])
    write_json_atomically(os.path.join(folder, TRANSFER_FILE), record)


def _predict(predictor, images, batch_size=256):
    scores = predictor.predict(images, batch_size=batch_size, verbose=0)
    return np.asarray(scores).argmax(axis=-1)


def with_transfer(evaluation, transfer):
    """A model's evaluation record with its transfer entries merged in
    (`transfer`: `transfer.json`'s record, or `{}`)."""
    if not transfer:
        return evaluation
    merged = {**evaluation, TRANSFER: transfer[TRANSFER],
              "majority_share": {**evaluation.get("majority_share", {}),
                                 **transfer["majority_share"]}}
    if "adapted" in transfer and "adapted" in evaluation:
        merged["adapted"] = {
            **evaluation["adapted"],
            **{name: {**evaluation["adapted"][name],
                      **transfer["adapted"][name]}
               for name in ("accuracy", "majority_share")}}
    return merged


def masking_summary(evaluations, settings):
    """A row's `"masking_checks"` over its seeds' evaluations (each with
    its transfer entries), or `{}` without attacks.

    Returns:
        dict: `{"masking_checks": {"passed", "checks", "per_seed"}}`, see
        `attack_checks.summarize`; `"per_seed"`: each seed's
        `attack_checks.masking_checks` result. With `"attack_images"`,
        also `"attack_clean"`: the mean, std and per-seed values of the
        clean accuracy of the attacked images (`epsilon_series`' epsilon
        0).
    """
    attacks = settings.attacks
    if not attacks:
        return {}
    per_seed = [attack_checks.masking_checks(
        evaluation, large_epsilon=attacks["large_epsilon"])
        for evaluation in evaluations]
    return {"masking_checks": {**attack_checks.summarize(per_seed),
                               "per_seed": per_seed},
            **_subset_clean(evaluations, attacks)}


def _subset_clean(evaluations, attacks):
    """`{"attack_clean": {"mean", "std", "per_seed"}}`: the clean
    accuracy of the attacked images over the seeds, when the attacks ran
    on the first N test images only (else `{}`: the clean column's)."""
    if attacks.get("attack_images") is None:
        return {}
    values = [attack_checks.clean_reference(evaluation)
              for evaluation in evaluations]
    return {"attack_clean": {
        "mean": float(np.mean(values)),
        "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
        "per_seed": values}}


def subset_note(settings):
    """The results.md note on attacks run on the first N test images
    only (`"attack_images"`), or `[]`."""
    count = (settings.attacks or {}).get("attack_images")
    if count is None:
        return []
    return ["", f"Attack columns (and their masking checks, whose ε = 0 "
            f"is the clean accuracy of the same images): the first {count} "
            "test images only (--attack-images), in the test set's fixed "
            "order, for every model and seed; the clean and corruption "
            "columns are on the whole test set."]


def vote_note(settings, runs):
    """The results.md note on the vote columns of models without votes,
    or `[]`."""
    attacks = settings.attacks
    if not attacks or not attacks["vote"]:
        return []
    without = sorted({run["router"] for run in runs
                      if run["evaluation"].get("attacks", {}).get(
                          "vote_target") == "output"})
    if not without:
        return []
    return ["", "Vote PGD: the models whose class capsules are not "
            "squashed sums of votes, so that the vote attack does not "
            f"apply ({', '.join(without)}: no router, activations as "
            "lengths, or no vote per child and class), get their PGD "
            "result, the output attack being the only one they have."]


_PANEL_TITLES = {"fgsm": "FGSM", "pgd": "PGD", "vote_pgd": "vote PGD",
                 "transfer_pgd": "transfer PGD (made on cnn)"}


def epsilon_series(results):
    """What `plot_accuracy_vs_epsilon` draws: per attack kind, per model,
    the epsilons (0 first: the clean accuracy, of the attacked images
    when the attacks ran on a subset), and the mean and std
    accuracy over seeds at each.

    Returns:
        dict: kind -> model -> `{"epsilon": [...], "mean": [...], "std":
        [...]}`; `{}` without attacks.

    Example:

    ```python
    series = epsilon_series(results)
    series["pgd"]["dynamic"]["mean"]  # accuracy at 0, then each epsilon
    ```
    """
    settings = ComparisonSettings.from_record(results["settings"])
    by_kind = {}
    for key, _ in attack_evaluation.attack_columns(
            settings.attacks, transfer_enabled(settings)):
        kind, _, epsilon = key.partition(":")
        if kind in _PANEL_TITLES:
            by_kind.setdefault(kind, []).append((float(epsilon), key))
    series = {}
    for kind, points in by_kind.items():
        points = [(0.0, "clean")] + sorted(points)
        series[kind] = {
            model: {"epsilon": [epsilon for epsilon, _ in points],
                    "mean": [_point(row, key)["mean"] for _, key in points],
                    "std": [_point(row, key)["std"] for _, key in points]}
            for model, row in results["routers"].items()}
    return series


def _point(row, key):
    """A row's accuracy cell of `key`; epsilon 0 of attacks on a subset
    is the clean accuracy of those images (`"attack_clean"`)."""
    if key == "clean" and "attack_clean" in row:
        return row["attack_clean"]
    return row["accuracy"][key]


def plot_accuracy_vs_epsilon(results, path, dpi=100):
    """Accuracy against epsilon, one panel per attack, one line per model
    (the mean over seeds, a +-std band; epsilon 0 is the clean accuracy).

    Writes nothing and returns `None` without attacks; raises
    `ImportError` without matplotlib.

    Example:

    ```python
    plot_accuracy_vs_epsilon(results, "runs/compare/accuracy_vs_epsilon.png")
    ```
    """
    from keras_caps.runs.atomic_files import write_atomically
    from keras_caps.visualization import _figures

    series = epsilon_series(results)
    if not series:
        return None
    figure = _figures.new_figure(
        4.0 * len(series) + _figures.LEGEND_WIDTH, 3.2)
    axes = figure.subplots(1, len(series), squeeze=False)[0]
    for axis, (kind, models) in zip(axes, series.items(), strict=True):
        for index, (model, line) in enumerate(models.items()):
            mean, std = np.array(line["mean"]), np.array(line["std"])
            style = _figures.series_style(index)
            axis.plot(line["epsilon"], 100 * mean, marker="o", label=model,
                      **style)
            axis.fill_between(line["epsilon"], 100 * (mean - std),
                              100 * (mean + std), color=style["color"],
                              alpha=0.1)
        axis.set_xlabel("ε (fraction of the pixel range, L∞)")
        axis.set_ylabel("test accuracy (%)")
        axis.set_title(_PANEL_TITLES[kind])
        axis.grid(alpha=0.3)
    _figures.legend_beside(figure, axes[0])
    write_atomically(path, lambda temporary: figure.savefig(temporary,
                                                            dpi=dpi))
    return path
