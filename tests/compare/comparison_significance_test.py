
"""The comparison table's intervals, tests and marks, from hand-made runs
and per-image predictions (no training), against SciPy."""

import csv
import io
import os

import numpy as np
import pytest
from scipy import stats as scipy_stats

from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison
from keras_caps.compare import comparison_results
from keras_caps.compare import comparison_significance as significance

pytestmark = pytest.mark.single_backend

_IMAGES = 20
_LABELS = np.arange(_IMAGES) % 10
# Per model and column: (first image right, images right) per seed 0-4;
# a model is right on images first, ..., first + count - 1 (mod 20).
_RIGHT = {
    "self_attention": {"clean": [(0, 18), (0, 19), (0, 18), (0, 19), (0, 18)],
                       "noise:0.2": [(0, 12), (0, 13), (0, 12), (0, 14),
                                     (0, 12)]},
    "dynamic": {"clean": [(1, 18), (1, 18), (1, 19), (1, 19), (1, 18)],
                "noise:0.2": [(2, 12), (2, 14), (2, 11), (2, 13), (2, 12)]},
    "cnn": {"clean": [(0, 14), (0, 15), (0, 14), (0, 16), (0, 15)],
            "noise:0.2": [(0, 4), (0, 5), (0, 4), (0, 6), (0, 5)]},
}
_KEYS = ("clean", "noise:0.2")


def _right(first, count):
    right = np.zeros(_IMAGES, dtype=bool)
    right[(first + np.arange(count)) % _IMAGES] = True
    return right


def _settings(seeds):
    return ComparisonSettings(
        tuple(_RIGHT), "mnist", seeds=seeds, epochs=1, steps_per_epoch=2,
        batch_size=16, validation="holdout", reconstruction=True,
        corruptions={"noise": [0.2], "pixels": [], "occlusion": [],
                     "affine": False},
        evaluation_seed=1234, data=None)


def _runs(folder, seeds, predictions=True):
    """One run per model and seed, its accuracies those of the
    predictions it saves."""
    runs = []
    for router, columns in _RIGHT.items():
        for seed in seeds:
            run_folder = os.path.join(folder, f"{router}_seed{seed}")
            os.makedirs(run_folder, exist_ok=True)
            right = {key: _right(*columns[key][seed]) for key in _KEYS}
            if predictions:  # As the robustness evaluation saves them.
                np.savez_compressed(
                    os.path.join(run_folder, "predictions.npz"),
                    labels=_LABELS.astype("uint8"), **{
                        key: np.where(right[key], _LABELS,
                                      (_LABELS + 1) % 10).astype("uint8")
                        for key in _KEYS})
            accuracy = {key: float(right[key].mean()) for key in _KEYS}
            runs.append({
                "router": router, "seed": seed,
                "model_path": os.path.join(run_folder, "model.keras"),
                "train_ms_per_step": 10.0, "hardware": "a test CPU",
                "evaluation": {
                    "trainable_parameters": 100,
                    "clean": {"accuracy": accuracy["clean"],
                              "macro_accuracy": accuracy["clean"],
                              "images_per_second": 1000.0},
                    "noise": {"0.2": accuracy["noise:0.2"]}}})
    return runs


def _accuracies(router, key, seeds):
    return np.array([_RIGHT[router][key][seed][1] / _IMAGES
                     for seed in seeds])


def _cell(values, mark=""):
    low, high = scipy_stats.t.interval(0.95, len(values) - 1,
                                       loc=values.mean(),
                                       scale=scipy_stats.sem(values))
    return (f"{100 * values.mean():.2f} [{100 * low:.2f}, "
            f"{100 * high:.2f}]{mark}")


def _holm_by_hand(p_values):
    """Each p-value's smallest Holm level: the largest (m - rank) p over
    the p-values ranked at or below it, capped at 1."""
    ranked = sorted(p_values)
    m = len(ranked)
    return [min(1.0, max((m - j) * ranked[j]
                         for j in range(ranked.index(p) + 1)))
            for p in p_values]


def test_table_matches_a_hand_computation(tmp_path):
    seeds = [0, 1, 2, 3, 4]
    runs = _runs(str(tmp_path), seeds)
    results = comparison.results_record(runs, _settings(seeds))
    statistics = results["statistics"]
    assert statistics["reference"] == "self_attention"
    reference = {key: _accuracies("self_attention", key, seeds)
                 for key in _KEYS}
    grid = [(model, key) for model in ("dynamic", "cnn") for key in _KEYS]
    t_p = [scipy_stats.ttest_rel(_accuracies(model, key, seeds),
                                 reference[key]).pvalue
           for model, key in grid]
    holm_p = dict(zip(grid, _holm_by_hand(t_p), strict=True))
    assert statistics["num_tests"] == 4
    for (model, key), p_value in zip(grid, t_p, strict=True):
        cell = statistics["models"][model][key]
        assert cell["t_test"]["p_value"] == pytest.approx(p_value, rel=1e-9)
        assert cell["t_p_holm"] == pytest.approx(holm_p[model, key],
                                                 rel=1e-9)
        assert cell["holds"] == (holm_p[model, key] < 0.05)
        for seed, mcnemar in zip(seeds, cell["mcnemar"], strict=True):
            mine = _right(*_RIGHT[model][key][seed])
            theirs = _right(*_RIGHT["self_attention"][key][seed])
            b, c = int(np.sum(mine & ~theirs)), int(np.sum(~mine & theirs))
            assert (mcnemar["seed"], mcnemar["b"], mcnemar["c"]) == (
                seed, b, c)
            assert mcnemar["p_value"] == pytest.approx(
                scipy_stats.binomtest(b, b + c, 0.5).pvalue if b + c
                else 1.0)
    # By eye: the CNN trails by 3-4 images of 20 on every seed (clean) and
    # 7-8 (noise): real; dynamic routing is level with the reference.
    assert [statistics["models"][model][key]["holds"]
            for model, key in grid] == [False, False, True, True]
    # All five differences negative: the sign-flip's smallest p, 2/32.
    assert statistics["models"]["cnn"]["clean"]["sign_flip"][
        "p_value"] == 1 / 16
    table = comparison.results_markdown(results)
    lines = table.splitlines()
    cnn = {key: _accuracies("cnn", key, seeds) for key in _KEYS}
    assert (f"| self_attention (reference) | 100 | 10.0 | 1000 | "
            f"{_cell(reference['clean'])} | {_cell(reference['clean'])} | "
            f"{_cell(reference['noise:0.2'])} |") in lines
    assert (f"| cnn | 100 | 10.0 | 1000 | {_cell(cnn['clean'])} | "
            f"{_cell(cnn['clean'], '*')} | {_cell(cnn['noise:0.2'], '*')} "
            "|") in lines
    dynamic = _accuracies("dynamic", "clean", seeds)
    assert f"| dynamic | 100 | 10.0 | 1000 | {_cell(dynamic)} | " \
        f"{_cell(dynamic)} |" in table
    _check_tests_rows(lines, holm_p, cnn, reference)
    # Relative corruption error of the mean accuracies: the CNN's error
    # is 76 % under noise against 26 % clean.
    assert "| cnn | 2.92 |" in lines
    assert results["routers"]["cnn"]["relative_corruption_error"] == {
        "noise:0.2": pytest.approx(0.76 / 0.26)}
    assert "mean over the 5 seeds [95 % Student-t interval" in table
    assert "Holm's correction over all 4 model × column tests" in table
    assert ("with 5 seeds its smallest possible p-value is 0.0625, so "
            "after a Holm correction over 4 tests it could not reach "
            "0.05") in table
    assert "± " not in table
    _check_csv(results, holm_p)


def _check_tests_rows(lines, holm_p, cnn, reference):
    differences = cnn["clean"] - reference["clean"]
    low, high = scipy_stats.t.interval(
        0.95, 4, loc=differences.mean(), scale=scipy_stats.sem(differences))
    # Clean: the CNN's 14-16 right images are among the reference's 18-19
    # (c = 3 or 4, b = 0): McNemar p = 2 / 2**c >= 0.125 on every seed.
    # Noise: 7-8 images right for the reference only, p <= 0.016.
    (clean_row,) = [line for line in lines
                    if line.startswith("| cnn | clean |")]
    assert clean_row.startswith(
        f"| cnn | clean | {100 * differences.mean():+.2f} "
        f"[{100 * low:+.2f}, {100 * high:+.2f}] |")
    assert clean_row.endswith(
        f"| {holm_p['cnn', 'clean']:.3g}* | 0.0625 | 0/5 |")
    (noise_row,) = [line for line in lines
                    if line.startswith("| cnn | noise std 0.2 |")]
    assert noise_row.endswith("| 0.0625 | 5/5 |")


def _check_csv(results, holm_p):
    rows = {row["router"]: row for row in
            csv.DictReader(io.StringIO(comparison.results_csv(results)))}
    values = _accuracies("cnn", "clean", [0, 1, 2, 3, 4])
    low, high = scipy_stats.t.interval(0.95, 4, loc=values.mean(),
                                       scale=scipy_stats.sem(values))
    assert float(rows["cnn"]["clean_low"]) == pytest.approx(low)
    assert float(rows["cnn"]["clean_high"]) == pytest.approx(high)
    assert float(rows["cnn"]["clean_t_p_holm"]) == pytest.approx(
        holm_p["cnn", "clean"])
    assert float(rows["cnn"]["clean_sign_flip_p"]) == 1 / 16
    assert float(rows["cnn"]["noise:0.2_mcnemar_p_max"]) == pytest.approx(
        2 / 2 ** 7)  # Seed 4: 12 right against 5, c = 7, b = 0.
    assert rows["self_attention"]["clean_t_p"] == ""
    assert float(rows["cnn"]["clean_std"]) == pytest.approx(
        values.std(ddof=1))


def test_per_seed_values_and_another_reference(tmp_path):
    seeds = [0, 1, 2, 3, 4]
    results = comparison.results_record(_runs(str(tmp_path), seeds),
                                        _settings(seeds), reference="cnn")
    assert results["routers"]["dynamic"]["per_seed"] == {
        "seeds": seeds,
        "accuracy": {key: _accuracies("dynamic", key, seeds).tolist()
                     for key in _KEYS},
        "macro_accuracy": _accuracies("dynamic", "clean", seeds).tolist()}
    assert list(results["statistics"]["models"]) == ["self_attention",
                                                     "dynamic"]
    assert "| cnn (reference) |" in comparison.results_markdown(results)
    with pytest.raises(ValueError, match="`reference`.*'em'"):
        comparison.results_record(_runs(str(tmp_path), seeds),
                                  _settings(seeds), reference="em")


def test_one_seed_has_no_interval_and_says_why(tmp_path):
    results = comparison.results_record(
        _runs(str(tmp_path), [0]), _settings([0]))
    table = comparison.results_markdown(results)
    assert "| cnn | 100 | 10.0 | 1000 | 70.00 | 70.00 | 20.00 |" in table
    assert "One seed: no interval or across-seed test" in table
    assert "*" not in table.split("Paired tests")[0].split("\n", 2)[2]
    # Per image, the seed pair is still tested: McNemar, 0 of 1 (clean).
    assert "| cnn | clean | -20.00 | n/a | n/a | n/a | 0/1 |" in table
    assert results["statistics"]["num_tests"] == 0


def test_without_predictions_or_statistics(tmp_path):
    seeds = [0, 1]
    results = comparison.results_record(
        _runs(str(tmp_path), seeds, predictions=False), _settings(seeds))
    cell = results["statistics"]["models"]["cnn"]["clean"]
    assert cell["mcnemar"] == [None, None]
    assert "n/a (no predictions)" in comparison.results_markdown(results)
    # A results.json of an earlier keras_caps: no statistics, no bounds.
    del results["statistics"]
    for row in results["routers"].values():
        for accuracy in row["accuracy"].values():
            del accuracy["low"], accuracy["high"]
    table = comparison.results_markdown(results)
    assert "| cnn | 100 | 10.0 | 1000 |" in table
    assert "Paired tests" not in table


def test_per_image_correct_reads_the_predictions_file(tmp_path):
    folder = str(tmp_path)
    assert significance.per_image_correct(folder, "clean") is None
    labels = np.array([0, 1, 2, 1])
    np.savez(os.path.join(folder, "predictions.npz"), labels=labels,
             clean=np.array([0, 1, 0, 1]),
             **{"noise:0.1": np.array([0, 2, 2, 1])})
    np.testing.assert_array_equal(
        significance.per_image_correct(folder, "clean"),
        [True, True, False, True])
    np.testing.assert_array_equal(
        significance.per_image_correct(folder, "noise:0.1"),
        [True, False, True, True])
    assert significance.per_image_correct(folder, "affine") is None
    # The generated affine set has labels of its own.
    np.savez(os.path.join(folder, "predictions.npz"), labels=labels,
             affine=np.array([5, 6], dtype="uint8"),
             **{"labels:affine": np.array([5, 7], dtype="uint8")})
    np.testing.assert_array_equal(
        significance.per_image_correct(folder, "affine"), [True, False])
    # Files that are not such a record give no per-image test: labels of
    # another length, score rows instead of classes, not a zip at all.
    for arrays in ({"labels": labels[:3], "clean": np.array([0, 1, 0, 1])},
                   {"labels": labels, "clean": np.eye(3)[[0, 2, 2, 1]]}):
        np.savez(os.path.join(folder, "predictions.npz"), **arrays)
        assert significance.per_image_correct(folder, "clean") is None
    with open(os.path.join(folder, "predictions.npz"), "w") as file:
        file.write("not a zip")
    assert significance.per_image_correct(folder, "clean") is None


def test_accuracy_intervals_are_cut_at_zero_and_one():
    # Three seeds at 0, 0 and 30 %: the t interval, 10 ± 4.303 · 17.32 /
    # sqrt(3) = 10 ± 43.0 %, reaches below 0; an accuracy cannot.
    values = [0.0, 0.0, 0.3]
    half = scipy_stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / 3**0.5
    assert 0.1 - half < 0
    cell = comparison_results.mean_std(values)
    assert cell["low"] == 0.0
    np.testing.assert_allclose(cell["high"], 0.1 + half)
    cell = comparison_results.mean_std([1.0, 1.0, 0.7])
    assert cell["high"] == 1.0
    np.testing.assert_allclose(cell["low"], 0.9 - half)


def test_equivalence_column_matches_scipy_two_one_sided_tests(tmp_path):
    # A margin of 6 points (1.2 images of 20): TOST per cell from SciPy's
    # one-sided one-sample t-tests of the per-seed differences, Holm over
    # the four cells as their own family.
    seeds = [0, 1, 2, 3, 4]
    runs = _runs(str(tmp_path), seeds)
    settings = _settings(seeds)
    settings = type(settings)(**{**vars(settings),
                                 "equivalence_margin": 0.06})
    results = comparison.results_record(runs, settings)
    statistics = results["statistics"]
    assert statistics["margin"] == 0.06
    grid = [(model, key) for model in ("dynamic", "cnn") for key in _KEYS]
    tost = []
    for model, key in grid:
        differences = (_accuracies(model, key, seeds)
                       - _accuracies("self_attention", key, seeds))
        tost.append(max(
            scipy_stats.ttest_1samp(differences, -0.06,
                                    alternative="greater").pvalue,
            scipy_stats.ttest_1samp(differences, 0.06,
                                    alternative="less").pvalue))
    holm_p = _holm_by_hand(tost)
    for (model, key), p_value, adjusted in zip(grid, tost, holm_p,
                                               strict=True):
        equivalence = statistics["models"][model][key]["equivalence"]
        assert equivalence["p_value"] == pytest.approx(p_value, rel=1e-9)
        assert equivalence["p_holm"] == pytest.approx(adjusted, rel=1e-9)
        assert equivalence["equivalent"] == (adjusted < 0.05)
    # Clean, dynamic routing is level with the reference (-1 to +1 image
    # of 20): equivalent. Under noise its differences spread from -1 to
    # +1 image, and 5 seeds cannot place them inside ±1.2 images after
    # Holm: inconclusive. The CNN trails by 3-8 images: outside.
    assert [statistics["models"][model][key]["equivalence"]["equivalent"]
            for model, key in grid] == [True, False, False, False]
    table = comparison.results_markdown(results)
    assert "equivalence (±6.00) Holm p |" in table
    dynamic_row = next(line for line in table.splitlines()
                       if line.startswith("| dynamic | clean |"))
    assert dynamic_row.endswith(f"| {holm_p[0]:.3g}≈ |")
    assert "inside ±6.00 points" in table
    rows = list(csv.DictReader(io.StringIO(comparison.results_csv(results))))
    dynamic = next(row for row in rows if row["router"] == "dynamic")
    assert float(dynamic["clean_equivalence_p_holm"]) == pytest.approx(
        holm_p[0], rel=1e-9)


def test_without_a_margin_no_difference_is_not_claimed(tmp_path):
    seeds = [0, 1, 2]
    results = comparison.results_record(_runs(str(tmp_path), seeds),
                                        _settings(seeds))
    assert results["statistics"]["margin"] is None
    cell = results["statistics"]["models"]["dynamic"]["clean"]
    assert cell["equivalence"] is None
    table = comparison.results_markdown(results)
    assert "Holm p |" in table and "equivalence (" not in table
    assert "is not evidence of no difference" in table


def test_ladder_steps_are_tested_against_each_other(tmp_path):
    # Of the ladder, this comparison has `cnn` and `dynamic`: one step,
    # dynamic minus cnn, tested per column with Holm over the ladder's
    # two cells only (the reference's family is apart).
    seeds = [0, 1, 2, 3, 4]
    results = comparison.results_record(_runs(str(tmp_path), seeds),
                                        _settings(seeds))
    ladder = results["ladder"]
    assert ladder["steps"] == [["cnn", "dynamic"]]
    assert ladder["num_tests"] == 2
    t_p = [scipy_stats.ttest_rel(_accuracies("dynamic", key, seeds),
                                 _accuracies("cnn", key, seeds)).pvalue
           for key in _KEYS]
    for key, p_value, adjusted in zip(_KEYS, t_p, _holm_by_hand(t_p),
                                      strict=True):
        cell = ladder["models"]["dynamic - cnn"][key]
        assert cell["t_test"]["p_value"] == pytest.approx(p_value, rel=1e-9)
        assert cell["t_p_holm"] == pytest.approx(adjusted, rel=1e-9)
        assert cell["difference"]["mean"] == pytest.approx(np.mean(
            _accuracies("dynamic", key, seeds) - _accuracies("cnn", key,
                                                             seeds)))
    table = comparison.results_markdown(results)
    assert "each step against the step below it" in table
    assert any(line.startswith("| dynamic - cnn | clean |")
               for line in table.splitlines())
    assert "over the ladder's 2 step × column t-tests" in table
    # A results.json of an earlier keras_caps has no ladder: no table.
    del results["ladder"]
    assert "step below it" not in comparison.results_markdown(results)
