"""The costs and normalisation tables of a comparison's `results.md`.

Below the accuracy table (`keras_caps.compare.comparison_report.
results_markdown`), from the per-router entries of `results.json`:

- **Costs**: trainable parameters without and with the decoder, inference
  multiply–adds of the classifier and of the decoder
  (`keras_caps.diagnostics.costs`), the steady-state training ms/step (the
  median over training batches, compilation, validation and checkpoints
  left out) and the training process's peak memory.
- **Collapse**: per column, the share of the test images given the most
  frequent predicted class (`majority_share`; about 1 / classes for a
  working model on a balanced test set, 1.0 when every image gets one
  class); with `--adapt-batchnorm`, the accuracy and majority share with
  the BatchNorm statistics re-estimated on each test set
  (`keras_caps.evaluation.batchnorm_adaptation`).

Records written before a number existed show `n/a` in its cell; a table
whose numbers are all missing is left out.
"""

from keras_caps.compare import comparison_significance


def costs_markdown(routers):
    """The costs table's lines (with a title), or `[]` without costs.

    Args:
        routers: dict. `results["routers"]`: model name -> its aggregated
            entry.

    Example:

    >>> row = {"trainable_parameters": 161664,
    ...        "trainable_parameters_with_decoder": 1573008,
    ...        "multiply_adds": 30143104, "decoder_multiply_adds": 1409024,
    ...        "steady_ms_per_step": 61.25, "peak_memory_mb": 2048.0,
    ...        "peak_memory_per_model": True}
    >>> costs_markdown({"dynamic": row})[5]
    '| dynamic | 161,664 | 1,573,008 | 30,143,104 | 1,409,024 | 61.2 | 2,048 |'
    """
    if not any(row.get("multiply_adds") is not None
               or row.get("steady_ms_per_step") is not None
               for row in routers.values()):
        return []
    lines = ["", "Costs: trainable parameters without and with the decoder, "
             "inference multiply–adds per image of the classifier and of "
             "the decoder (counted from layer shapes), steady-state "
             "training ms/step (median over training batches, without "
             "compilation, validation or checkpoints; mean over seeds) and "
             "the training process's peak memory (MiB, largest over seeds; "
             "framework runtime included).", "",
             "| model | params | params with decoder | multiply–adds | "
             "decoder multiply–adds | steady ms/step | peak MiB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    rows = [_costs_row(name, row) for name, row in routers.items()]
    shared = [name for name, row in routers.items()
              if row.get("peak_memory_mb") is not None
              and not row.get("peak_memory_per_model")]
    notes = []
    if shared:
        notes = ["", "Peak memory †: not one model's (trained in a process "
                 "with other models, `--isolation session`, or by an "
                 f"earlier command): {', '.join(shared)}."]
    return lines + rows + notes


def _costs_row(name, row):
    memory = row.get("peak_memory_mb")
    memory_cell = "n/a" if memory is None else f"{memory:,.0f}"
    if memory is not None and not row.get("peak_memory_per_model"):
        memory_cell += " †"
    speed = row.get("steady_ms_per_step")
    cells = [name, _count(row.get("trainable_parameters")),
             _count(row.get("trainable_parameters_with_decoder")),
             _count(row.get("multiply_adds")),
             _count(row.get("decoder_multiply_adds")),
             "n/a" if speed is None else f"{speed:.1f}", memory_cell]
    return "| " + " | ".join(cells) + " |"


def _count(value):
    return "n/a" if value is None else f"{value:,}"


def collapse_markdown(routers, columns):
    """The majority-share table's lines (and, with adapted statistics,
    the adapted accuracies), or `[]` when no model recorded them.

    Args:
        routers: dict. `results["routers"]`.
        columns: list of `(key, title)`, clean first (`comparison.columns`).

    Example:

    >>> row = {"majority_share": {"clean": {"mean": 0.11},
    ...                           "noise:0.4": {"mean": 1.0}}}
    >>> collapse_markdown({"cnn": row}, [("clean", "clean"),
    ...                                  ("noise:0.4", "noise std 0.4")])[5]
    '| cnn | 0.11 | 1.00 |'
    """
    if not any("majority_share" in row for row in routers.values()):
        return []
    titles = [title for _, title in columns]
    lines = ["", "Collapse: the share of the test images given the most "
             "frequent predicted class, mean over seeds (about 1 / classes "
             "for a working model, 1.00 when every image gets one class).",
             "", "| model | " + " | ".join(titles) + " |",
             "|---|" + "---:|" * len(titles)]
    for name, row in routers.items():
        lines.append(_share_row(name, row.get("majority_share"), columns))
    if any("adapted_accuracy" in row for row in routers.values()):
        lines += ["", "With BatchNorm statistics re-estimated on each test "
                  "set (`--adapt-batchnorm`; a diagnosis, not a deployable "
                  "model): test accuracy in %, mean [95 % interval], and "
                  "the majority share in brackets.", "",
                  "| model | " + " | ".join(titles) + " |",
                  "|---|" + "---:|" * len(titles)]
        for name, row in routers.items():
            lines.append(_adapted_row(name, row, columns))
    return lines


def _share_row(name, shares, columns):
    cells = [name] + ["n/a" if not shares or key not in shares
                      else f"{shares[key]['mean']:.2f}"
                      for key, _ in columns]
    return "| " + " | ".join(cells) + " |"


def _adapted_row(name, row, columns):
    accuracy = row.get("adapted_accuracy")
    shares = row.get("adapted_majority_share", {})
    cells = [name]
    for key, _ in columns:
        if not accuracy or key not in accuracy:
            cells.append("n/a")
            continue
        cell = comparison_significance.accuracy_cell(accuracy[key])
        if key in shares:
            cell += f" ({shares[key]['mean']:.2f})"
        cells.append(cell)
    return "| " + " | ".join(cells) + " |"


_COST_KEYS = ("trainable_parameters_with_decoder", "multiply_adds",
              "decoder_multiply_adds", "steady_ms_per_step",
              "peak_memory_mb")


def csv_header(columns):
    """The costs and collapse columns `results.csv` ends with: the keys of
    `_COST_KEYS`, then per column key its mean majority share and its mean
    accuracy with adapted BatchNorm statistics."""
    return (list(_COST_KEYS)
            + [f"{key}_majority_share" for key, _ in columns]
            + [f"{key}_adapted_mean" for key, _ in columns])


def csv_cells(row, columns):
    """`row`'s cells of `csv_header` (`""` where a record lacks one).

    Example:

    >>> csv_cells({"multiply_adds": 5, "majority_share": {
    ...     "clean": {"mean": 0.25}}}, [("clean", "clean")])
    ['', '5', '', '', '', '0.25', '']
    """
    cells = ["" if row.get(key) is None else repr(row[key])
             for key in _COST_KEYS]
    for name in ("majority_share", "adapted_accuracy"):
        values = row.get(name) or {}
        cells += [repr(values[key]["mean"]) if key in values else ""
                  for key, _ in columns]
    return cells
