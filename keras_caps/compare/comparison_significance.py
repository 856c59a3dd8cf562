"""Every model of a comparison tested against a reference model.

`reference_tests(aggregated, runs, reference, keys)` tests each model
against the reference on every column (clean accuracy and each
corruption):

- across seeds (each seed's model paired with the reference's model of
  the same seed): Student's paired t-test and the exact sign-flip test of
  the per-seed accuracy differences, and the 95 % Student-t interval of
  their mean; the t-tests' p-values are corrected by Holm's method over
  the whole model × column grid, and a difference "holds" when its
  corrected p-value is below `ALPHA`;
- per seed pair, per image: McNemar's exact test on the two models'
  right / wrong table, when both saved their per-image predictions
  (`predictions.npz` next to their `robustness.json`, read by
  `per_image_correct`); not corrected;
- with an equivalence margin (`ComparisonSettings.equivalence_margin`):
  two one-sided paired t-tests that the difference lies inside it,
  Holm-corrected over the grid as a family of their own.

`statistics_markdown` writes the tables and the note of `results.md`.
"""

import logging
import math
import os

import numpy as np

from keras_caps.compare import comparison_statistics as stats
from keras_caps.compare import multi_digit_comparison
from keras_caps.evaluation import predictions as predictions_lib

ALPHA = 0.05
CONFIDENCE = 0.95
ONE_SEED = "one seed: no interval or across-seed test"


def read_predictions(folder):
    """The per-image predictions a model's evaluation saved in `folder`
    (`keras_caps.evaluation.predictions.read_predictions`: `"labels"`,
    then per column key the predicted classes of the same images), or
    `None` when there are none or they cannot be read (logged): that
    model then has no per-image test.

    Example:

    ```python
    read_predictions("runs/compare/models/dynamic_seed0")["noise:0.2"]
    ```
    """
    try:
        return predictions_lib.read_predictions(folder)
    except FileNotFoundError:
        return None
    except ValueError as error:
        logging.warning("%s No per-image test for its model.", error)
        return None


def per_image_correct(folder, key):
    """Which test images a model classifies right under column `key`.

    Args:
        folder: str. A model's run folder holding `predictions.npz` (see
            `read_predictions`).
        key: str. A column key: `"clean"`, `"noise:0.1"`, ...

    Returns:
        1-D bool array (`True` where the prediction is the label), or
        `None` when the folder saved no predictions for `key`.

    Raises:
        ValueError: the predictions and the labels differ in length.

    Example:

    ```python
    correct = per_image_correct("runs/compare/models/cnn_seed0", "clean")
    ```
    """
    predictions = read_predictions(folder)
    if predictions is None or key not in predictions:
        return None
    return _correct(predictions, key, folder)


def _correct(predictions, key, folder):
    labels_key = predictions_lib.labels_of(key, predictions)
    labels = predictions.get(labels_key)
    if labels is None or len(labels) != len(predictions[key]):
        raise ValueError(
            f"{os.path.join(folder, predictions_lib.PREDICTIONS_FILE)!r}: "
            f"expected `{labels_key}` with one label per prediction of "
            f"{key!r}. Received: "
            f"{None if labels is None else len(labels)} labels, "
            f"{len(predictions[key])} predictions")
    return predictions[key] == labels


def reference_tests(aggregated, runs, reference, keys, margin=None):
    """Each model against `reference` on each column; see the module.

    Args:
        aggregated: dict. Per model, its `"per_seed"` record
            (`{"seeds": [...], "accuracy": {key: [...]}}`), as
            `keras_caps.compare.comparison_results.aggregate` makes it.
        runs: list of dict. The comparison's runs (`"router"`, `"seed"`,
            `"model_path"`): their folders hold the predictions.
        reference: str. A key of `aggregated`.
        keys: list of str. The column keys, clean first.
        margin: float or `None`. The equivalence margin (accuracy, e.g.
            0.005 for half a point): every cell also gets the two
            one-sided tests that the difference lies inside `±margin`,
            Holm-corrected as their own family.

    Returns:
        dict: `"reference"`, `"alpha"`, `"confidence"`, `"num_seeds"`,
        `"num_tests"` (the t-tests Holm corrects), `"reason"` (why there
        is no across-seed test, else `None`) and `"models"`: per other
        model and column key, `"difference"` (the mean and interval of
        the per-seed differences, model minus reference), `"t_test"`,
        `"t_p_holm"`, `"sign_flip"`, `"holds"`, `"mcnemar"` (per
        seed: `"seed"`, `"b"`, `"c"`, `"p_value"`; `None` where the
        predictions are missing) and, with a `margin`, `"equivalence"`
        (`comparison_statistics.paired_equivalence_test`'s, with
        `"p_holm"` and `"equivalent"`, else `None`); and `"margin"`.

    Example:

    ```python
    tests = reference_tests(results["routers"], results["models"],
                            "self_attention", ["clean", "noise:0.2"])
    ```
    """
    if reference not in aggregated:
        raise ValueError(
            "Received an invalid value for `reference`, expected one of "
            f"the compared models {list(aggregated)}. Received: "
            f"reference={reference!r}")
    seeds = aggregated[reference]["per_seed"]["seeds"]
    predictions = {(run["router"], run["seed"]): run_predictions(run)
                   for run in runs}
    others = [model for model in aggregated if model != reference]
    tests = {model: {key: column_tests(aggregated, predictions, model,
                                       reference, key, margin)
                     for key in keys}
             for model in others}
    correct_by_holm(tests)
    correct_equivalence_by_holm(tests)
    return {"reference": reference, "alpha": ALPHA, "margin": margin,
            "confidence": CONFIDENCE, "num_seeds": len(seeds),
            "num_tests": sum(cell["t_test"]["p_value"] is not None
                             for row in tests.values()
                             for cell in row.values()),
            "reason": ONE_SEED if len(seeds) < 2 else None,
            "models": tests}


def run_predictions(run):
    """`(folder, predictions or None)` of one run of the comparison."""
    folder = os.path.dirname(run["model_path"])
    return folder, read_predictions(folder)


def column_tests(aggregated, predictions, model, reference, key, margin):
    """One model against the reference on one column: the cell
    `reference_tests` describes (before the Holm corrections)."""
    mine, theirs = (aggregated[name]["per_seed"] for name in
                    (model, reference))
    if mine["seeds"] != theirs["seeds"]:
        raise ValueError(
            f"{model!r} and the reference {reference!r} must have models "
            f"of the same seeds. Received: seeds {mine['seeds']} and "
            f"{theirs['seeds']}")
    values = np.asarray(mine["accuracy"][key], dtype="float64")
    reference_values = np.asarray(theirs["accuracy"][key], dtype="float64")
    differences = values - reference_values
    t_test = stats.paired_t_test(values, reference_values)
    if t_test["t"] is not None and math.isinf(t_test["t"]):
        t_test["t"] = None  # JSON has no infinity; p_value is 0.
    sign_flip = (stats.sign_flip_test(differences)
                 if 2 <= len(differences) <= stats.MAX_SIGN_FLIP_VALUES
                 else None)
    mcnemar = [_mcnemar(predictions, model, reference, seed, key)
               for seed in mine["seeds"]]
    equivalence = (None if margin is None else
                   stats.paired_equivalence_test(values, reference_values,
                                                 margin))
    return {"difference": stats.mean_interval(differences, CONFIDENCE),
            "t_test": t_test, "t_p_holm": None, "sign_flip": sign_flip,
            "holds": False, "mcnemar": mcnemar, "equivalence": equivalence}


def _mcnemar(predictions, model, reference, seed, key):
    """McNemar's exact test of one seed pair, `None` without
    predictions (or with predictions of other images)."""
    (folder, mine), (_, theirs) = (predictions[(name, seed)]
                                   for name in (model, reference))
    saved = multi_digit_comparison.saved_key(key)  # MultiMNIST's exact match
    if (mine is None or theirs is None or saved not in mine
            or saved not in theirs):
        return None
    labels = predictions_lib.labels_of(key, mine)
    if labels != predictions_lib.labels_of(key, theirs) or not (
            np.array_equal(mine.get(labels), theirs.get(labels))):
        logging.warning("%r and the reference's model of seed %d saved "
                        "predictions of other test images: no per-image "
                        "test.", folder, seed)
        return None
    reference_folder = predictions[(reference, seed)][0]
    result = stats.mcnemar_exact(
        _image_correct(mine, key, folder),
        _image_correct(theirs, key, reference_folder))
    return {"seed": seed, **result}


def _image_correct(predictions, key, folder):
    """`_correct`; for an exact-match column (MultiMNIST), per image."""
    return multi_digit_comparison.per_image_correct(
        predictions, key,
        lambda found, column: _correct(found, column, folder))


def correct_by_holm(tests):
    """Fills `"t_p_holm"` and `"holds"` of every cell with a t-test."""
    cells = [cell for row in tests.values() for cell in row.values()
             if cell["t_test"]["p_value"] is not None]
    if not cells:
        return
    adjusted = stats.holm([cell["t_test"]["p_value"] for cell in cells])
    for cell, p_value in zip(cells, adjusted, strict=True):
        cell["t_p_holm"] = p_value
        cell["holds"] = p_value < ALPHA


def correct_equivalence_by_holm(tests):
    """Fills `"p_holm"` and `"equivalent"` of every equivalence test: the
    TOST p-values are Holm-corrected over all the model × column cells
    that have one, a family of their own."""
    results = [cell["equivalence"] for row in tests.values()
               for cell in row.values()
               if cell["equivalence"] is not None
               and cell["equivalence"]["p_value"] is not None]
    if not results:
        return
    adjusted = stats.holm([result["p_value"] for result in results])
    for result, p_value in zip(results, adjusted, strict=True):
        result["p_holm"] = p_value
        result["equivalent"] = p_value < ALPHA


def accuracy_cell(accuracy, holds=False):
    """`"97.12 [96.80, 97.44]"` (in %), `"97.12"` without an interval;
    `"*"` appended where the difference from the reference holds.

    Example:

    >>> accuracy_cell({"mean": 0.9712, "low": 0.968, "high": 0.9744}, True)
    '97.12 [96.80, 97.44]*'
    """
    text = f"{100 * accuracy['mean']:.2f}"
    if accuracy.get("low") is not None:
        text += (f" [{100 * accuracy['low']:.2f}, "
                 f"{100 * accuracy['high']:.2f}]")
    return text + ("*" if holds else "")


def statistics_markdown(results, titles):
    """The tables and notes `results.md` adds below its accuracy table:
    relative corruption errors, the tests against the reference and what
    the marks mean.

    Args:
        results: dict. The `results.json` record, with `"statistics"`.
        titles: list of `(key, title)`, the columns, clean first.

    Example:

    ```python
    lines = statistics_markdown(results, columns(settings))
    ```
    """
    statistics = results.get("statistics")
    lines = _relative_error_table(results["routers"], titles)
    if statistics is None:  # A results.json of an earlier keras_caps.
        return lines
    lines += ["", f"Paired tests against the reference "
              f"`{statistics['reference']}` (difference = model minus "
              "reference, in points):", ""]
    lines += tests_table(statistics, titles)
    return lines + ["", _note(statistics)]


def _relative_error_table(rows, titles):
    # Corruptions only: the viewpoint columns are no corruption of the
    # clean images (the comparison's viewpoint note relates them).
    corrupted = [(key, title) for key, title in titles[1:]
                 if key not in predictions_lib.VIEWPOINT_KEYS
                 and key != multi_digit_comparison.clean_key(key)]
    if not corrupted:
        return []
    lines = ["", "Relative corruption error (error under the corruption / "
             "clean error, of the mean accuracies; 1 = unaffected):", "",
             "| router | " + " | ".join(title for _, title in corrupted)
             + " |", "|---|" + "---:|" * len(corrupted)]
    for router, row in rows.items():
        clean = row["accuracy"]["clean"]["mean"]
        cells = []
        for key, _ in corrupted:
            ratio = stats.relative_corruption_error(
                row["accuracy"][key]["mean"], _clean_of(row, key, clean))
            cells.append("n/a (no error)" if ratio is None
                         else "∞ (clean 100 %)" if math.isinf(ratio)
                         else f"{ratio:.2f}")
        lines.append(f"| {router} | " + " | ".join(cells) + " |")
    return lines


def _clean_of(row, key, clean):
    """The clean accuracy column `key`'s error is relative to: for an
    attack column of attacks on the first N test images, that of those
    images (the row's `"attack_clean"`); else the clean column's."""
    if key.startswith(predictions_lib.ATTACK_PREFIXES) and (
            "attack_clean" in row):
        return row["attack_clean"]["mean"]
    if multi_digit_comparison.is_exact_match(key):  # MultiMNIST.
        return row["accuracy"][multi_digit_comparison.clean_key(key)]["mean"]
    return clean


def tests_table(statistics, titles):
    """The Markdown rows of the tests of `statistics["models"]` (model
    minus reference per column), with the equivalence column when a
    margin was given."""
    margin = statistics.get("margin")
    header = ("| model | column | difference [95 % interval] | t-test p | "
              "Holm p | sign-flip p | McNemar p < 0.05 (seed pairs) |")
    rule = "|---|---|---:|---:|---:|---:|---:|"
    if margin is not None:
        header += f" equivalence (±{100 * margin:.2f}) Holm p |"
        rule += "---:|"
    lines = [header, rule]
    for model, row in statistics["models"].items():
        for key, title in titles:
            cell = row[key]
            cells = [model, title, _difference_cell(cell["difference"]),
                     _p(cell["t_test"]["p_value"]),
                     _p(cell["t_p_holm"]) + ("*" if cell["holds"] else ""),
                     _p((cell["sign_flip"] or {}).get("p_value")),
                     _mcnemar_cell(cell["mcnemar"])]
            if margin is not None:
                cells.append(_equivalence_cell(cell.get("equivalence")))
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _difference_cell(difference):
    """`"+0.46 [+0.10, +0.82]"`: the mean difference in points, with its
    interval when there is one."""
    text = f"{100 * difference['mean']:+.2f}"
    if difference["low"] is not None:
        text += (f" [{100 * difference['low']:+.2f}, "
                 f"{100 * difference['high']:+.2f}]")
    return text


def _equivalence_cell(equivalence):
    """The Holm-corrected TOST p-value, `≈` where equivalence holds."""
    if equivalence is None or equivalence.get("p_holm") is None:
        return "n/a"
    return _p(equivalence["p_holm"]) + ("≈" if equivalence["equivalent"]
                                        else "")


def _p(value):
    return "n/a" if value is None else f"{value:.3g}"


def _mcnemar_cell(results):
    done = [result for result in results if result is not None]
    if not done:
        return "n/a (no predictions)"
    below = sum(result["p_value"] < ALPHA for result in done)
    return f"{below}/{len(done)}"


def _note(statistics):
    """What the marks, intervals and tests mean, and what they cannot
    show with this many seeds."""
    n = statistics["num_seeds"]
    m = statistics["num_tests"]
    reference = statistics["reference"]
    if statistics["reason"] is not None:
        across = (f"{statistics['reason'].capitalize()} (a spread over "
                  "seeds needs at least 2), so no difference is marked.")
    else:
        across = (
            f"Cells: mean over the {n} seeds [95 % Student-t interval of "
            "that mean]. `*` on an accuracy cell: the difference from the "
            f"reference `{reference}` holds: Student's paired t-test on the "
            "per-seed "
            "accuracy differences (each seed's model against the "
            "reference's model of that seed, two-sided) has p < "
            f"{ALPHA} after Holm's correction over all {m} model × column "
            "tests (the t-tests' p-values are the ones corrected). The "
            "exact sign-flip test of the same differences is given beside "
            "it, uncorrected, as a check free of the normality assumption")
        smallest = 2.0 / 2 ** n if n <= stats.MAX_SIGN_FLIP_VALUES else 0
        if smallest and smallest * max(m, 1) >= ALPHA:
            across += (f"; with {n} seeds its smallest possible p-value is "
                       f"{smallest:.3g}, so after a Holm correction over "
                       f"{m} tests it could not reach {ALPHA}")
        elif n > stats.MAX_SIGN_FLIP_VALUES:
            across += (f" (not computed for more than "
                       f"{stats.MAX_SIGN_FLIP_VALUES} seeds)")
        across += "."
    note = (f"{across} McNemar: the seed pairs (model and reference of "
            "the same seed) whose per-image right/wrong table gives an "
            f"exact McNemar p < {ALPHA}, not corrected for multiple tests "
            "(n/a: no per-image predictions saved).")
    return note + _equivalence_note(statistics)


def _equivalence_note(statistics):
    """What the equivalence column means, when there is one."""
    margin = statistics.get("margin")
    if margin is None:
        return (" No equivalence margin was given (--equivalence-margin), "
                "so a difference that does not hold is not evidence of "
                "no difference.")
    return (
        f" Equivalence: two one-sided paired t-tests (TOST) that the mean "
        f"difference lies inside ±{100 * margin:.2f} points, the margin "
        "fixed before the comparison ran; their p-values (the larger of "
        "the two) are Holm-corrected over all the model × column cells, a "
        f"family of their own, and `≈` marks p < {ALPHA}: the difference "
        "is smaller than the margin. A cell with neither `*` nor `≈` is "
        "inconclusive at this number of seeds.")
