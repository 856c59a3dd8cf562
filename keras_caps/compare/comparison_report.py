"""The written results: `results.csv`, `results.md` and
`accuracy_vs_severity.png`, from the results record.
"""

import csv
import io

import numpy as np

from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_ladder
from keras_caps.compare import comparison_significance
from keras_caps.compare import comparison_statistics
from keras_caps.compare import comparison_tables
from keras_caps.compare import learning_curves
from keras_caps.compare import multi_digit_comparison
from keras_caps.compare.comparison_results import SEVERITY_LABELS
from keras_caps.compare.comparison_results import columns
from keras_caps.compare.comparison_settings import ComparisonSettings
from keras_caps.datasets import viewpoints as viewpoints_lib
from keras_caps.evaluation import attack_checks
from keras_caps.runs.atomic_files import write_atomically
from keras_caps.training.training_settings import PROTOCOLS


def results_csv(results):
    """The table as CSV: one row per router, accuracies as fractions."""
    settings = ComparisonSettings.from_record(results["settings"])
    output = io.StringIO()
    writer = csv.writer(output, lineterminator="\n")
    header = ["router", "trainable_parameters", "train_ms_per_step",
              "images_per_second", "macro_accuracy_mean",
              "macro_accuracy_std"]
    for key, _ in columns(settings):
        header += [f"{key}_mean", f"{key}_std"]
    header += _csv_statistics_header(settings)
    header += comparison_tables.csv_header(columns(settings))
    header += ["masking_checks"] if settings.attacks else []
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
        values += _csv_statistics(results, settings, router)
        values += comparison_tables.csv_cells(row, columns(settings))
        if settings.attacks:
            values.append("pass" if row["masking_checks"]["passed"]
                          else "fail")
        writer.writerow(values)
    return output.getvalue()


_CSV_TESTS = ("difference", "t_p", "t_p_holm", "sign_flip_p",
              "mcnemar_p_max")


def _csv_tests(settings):
    """The test columns per column key: `_CSV_TESTS`, and the
    Holm-corrected equivalence p-value with a margin."""
    return _CSV_TESTS + (("equivalence_p_holm",)
                         if settings.equivalence_margin else ())


def _csv_statistics_header(settings):
    """The interval and test columns, after the means and stds: per
    column key, the 95 % interval's bounds; the difference from the
    reference, the t-test's p-value, raw and Holm-corrected, the
    sign-flip p-value, the largest McNemar p-value over the seeds and,
    with a margin, the equivalence test's Holm-corrected p-value."""
    header = []
    for key, _ in columns(settings):
        header += [f"{key}_low", f"{key}_high"]
    for key, _ in columns(settings):
        header += [f"{key}_{name}" for name in _csv_tests(settings)]
    return header


def _csv_statistics(results, settings, router):
    """`router`'s cells of `_csv_statistics_header` ("" where none: no
    interval, the reference's own tests, an earlier results.json)."""
    row = results["routers"][router]
    values = []
    for key, _ in columns(settings):
        values += [_csv_number(row["accuracy"][key].get(bound))
                   for bound in ("low", "high")]
    tests = (results.get("statistics") or {}).get("models", {}).get(router)
    for key, _ in columns(settings):
        if tests is None:
            values += [""] * len(_csv_tests(settings))
            continue
        cell = tests[key]
        mcnemar = [result["p_value"] for result in cell["mcnemar"]
                   if result is not None]
        values += [_csv_number(value) for value in (
            cell["difference"]["mean"], cell["t_test"]["p_value"],
            cell["t_p_holm"], (cell["sign_flip"] or {}).get("p_value"),
            max(mcnemar) if mcnemar else None)]
        if settings.equivalence_margin:
            values.append(_csv_number(
                (cell.get("equivalence") or {}).get("p_holm")))
    return values


def _csv_number(value):
    return "" if value is None else repr(float(value))


def results_markdown(results):
    """The table as Markdown, with the protocol it was measured under."""
    settings = ComparisonSettings.from_record(results["settings"])
    runs = results["models"]
    hardware = runs[0]["hardware"] if runs else "unknown"
    steps = ("all" if settings.steps_per_epoch is None
             else settings.steps_per_epoch)
    lines = [
        f"Dataset `{settings.dataset}` "
        f"({_data_text(settings.data)})"
        f", {len(settings.seeds)} seeds "
        f"{list(settings.seeds)}, "
        f"{'at most ' if settings.until_accuracy else ''}"
        f"{settings.epochs} epochs of {steps} "
        f"steps, batch {settings.batch_size}, one recipe "
        f"(Efficient-CapsNet's optimizer and schedule), model selection: "
        f"{PROTOCOLS[settings.validation]}; capsule models "
        f"{'with' if settings.reconstruction else 'without'} their "
        f"decoder. Test accuracy in %, mean over seeds [95 % interval]; "
        f"corruptions seeded with {settings.evaluation_seed}. "
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
    lines += comparison_ladder.ladder_markdown(results.get("ladder"),
                                               columns(settings))
    lines += learning_curves.until_accuracy_notes(results)
    lines += _viewpoint_notes(settings.viewpoints, results)
    lines += multi_digit_comparison.notes(settings.partners_per_digit,
                                          results)
    return "\n".join(lines) + "\n"


def _viewpoint_notes(viewpoints, results):
    """What the viewpoint columns hold, and each model's error on the
    novel viewpoints over its error on the familiar ones (Hinton et al.
    2018, section 5.1, Table 2 compares these errors); none without
    `viewpoints`."""
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

    settings = ComparisonSettings.from_record(results["settings"])
    corruptions = settings.corruptions
    kinds = [kind for kind in ("noise", "pixels", "occlusion")
             if corruptions[kind]]
    figure = _figures.new_figure(
        4.0 * max(len(kinds), 1) + _figures.LEGEND_WIDTH, 3.2)
    axes = figure.subplots(1, max(len(kinds), 1), squeeze=False)[0]
    for axis, kind in zip(axes, kinds or [None], strict=True):
        for index, (router, row) in enumerate(results["routers"].items()):
            severities = [0] + list(corruptions.get(kind) or [])
            keys = ["clean"] + [f"{kind}:{s}" for s in severities[1:]]
            mean = np.array([row["accuracy"][k]["mean"] for k in keys])
            std = np.array([row["accuracy"][k]["std"] for k in keys])
            style = _figures.series_style(index)
            axis.plot(severities, 100 * mean, marker="o", label=router,
                      **style)
            axis.fill_between(severities, 100 * (mean - std),
                              100 * (mean + std), color=style["color"],
                              alpha=0.1)
        axis.set_xlabel(SEVERITY_LABELS.get(kind, "severity"))
        axis.set_ylabel("test accuracy (%)")
        axis.set_title(kind or "clean")
        axis.grid(alpha=0.3)
    _figures.legend_beside(figure, axes[0])
    write_atomically(path, lambda temporary: figure.savefig(temporary,
                                                            dpi=dpi))
    return path
