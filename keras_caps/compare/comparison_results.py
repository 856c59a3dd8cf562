"""The results record (`results.json`): each model's accuracies per column,
aggregated over seeds, with costs and the tests against the reference.
"""


import numpy as np

from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_ladder
from keras_caps.compare import comparison_significance
from keras_caps.compare import comparison_statistics
from keras_caps.compare import multi_digit_comparison
from keras_caps.compare.comparison_settings import check_reference
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import predictions as predictions_lib

SEVERITY_LABELS = {"noise": "noise std", "pixels": "pixels replaced",
                    "occlusion": "occluded side (px)"}


def columns(settings):
    """`(key, title)` of each accuracy column of the `ComparisonSettings`:
    clean, then the viewpoints, corruptions and attacks."""
    result = [("clean", "clean")]
    if settings.viewpoints is not None:  # Hinton et al. 2018.
        result += [(key, f"{key.split(':')[1]} viewpoints")
                   for key in predictions_lib.VIEWPOINT_KEYS]
    corruptions = settings.corruptions
    for kind in ("noise", "pixels", "occlusion"):
        for severity in corruptions[kind]:
            result.append((f"{kind}:{severity}",
                           f"{SEVERITY_LABELS[kind]} {severity}"))
    if corruptions["affine"]:
        result.append(("affine", "affNIST (Tieleman)"
                       if corruptions.get("affnist_dir")
                       else "affine (generated)"))
    if corruptions.get("translated"):
        result.append(("translated", "translated"))
    result += attack_evaluation.attack_columns(
        settings.attacks, comparison_attacks.transfer_enabled(settings))
    return result + multi_digit_comparison.exact_match_columns(
        settings.partners_per_digit, result)


def _accuracy(evaluation, key):
    if key == "clean":
        return evaluation["clean"]["accuracy"]
    if key in ("affine", "translated"):
        return evaluation[key]
    if multi_digit_comparison.is_exact_match(key):  # MultiMNIST.
        return multi_digit_comparison.accuracy(evaluation, key)
    kind, severity = key.split(":")
    return evaluation[kind][severity]


def mean_std(values):
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
        settings: `ComparisonSettings`, resolved.
        reference: str or `None`. The model the others are tested against
            (`None`: the first router).

    Example:

    ```python
    results = results_record(runs, settings, reference="dynamic")
    ```
    """
    aggregated = aggregate(runs, settings)
    reference = check_reference(reference, settings.routers)
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
    keys = [key for key, _ in columns(settings)]
    return {"settings": settings.to_record(), "models": runs,
            "routers": aggregated,
            "statistics": comparison_significance.reference_tests(
                aggregated, runs, reference, keys,
                margin=settings.equivalence_margin),
            "ladder": comparison_ladder.ladder_tests(
                aggregated, runs, keys, margin=settings.equivalence_margin)}


def aggregate(runs, settings):
    """Per router: means, sample standard deviations and 95 % intervals
    over seeds, and the per-seed values (`"per_seed"`).

    `"train_ms_per_step"` is the mean over the seeds whose speed is known
    (`"speed_seeds"`), `None` when none is.
    """
    aggregated = {}
    for router in settings.routers:
        mine = [run for run in runs if run["router"] == router]
        evaluations = [run["evaluation"] for run in mine]
        timed = [run for run in mine if run["train_ms_per_step"] is not None]
        aggregated[router] = {
            "num_seeds": len(mine),
            "trainable_parameters": evaluations[0]["trainable_parameters"],
            "accuracy": {key: mean_std([_accuracy(e, key)
                                         for e in evaluations])
                         for key, _ in columns(settings)},
            "macro_accuracy": mean_std(
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


def run_costs(training_record, isolation, trained_before):
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
    """A router's costs over its seeds (new keys of `aggregate`).

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
        key: mean_std([e["majority_share"][key] for e in evaluations])
        for key in keys}}
    if settings.adapt_batchnorm:
        for name in ("accuracy", "majority_share"):
            summary[f"adapted_{name}"] = {
                key: mean_std([e["adapted"][name][key]
                                for e in evaluations]) for key in keys}
    return summary
