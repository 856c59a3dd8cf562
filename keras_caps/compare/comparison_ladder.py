"""The control ladder's adjacent steps tested against each other.

The ladder (`compared_models.CONTROL_LADDER`: `cnn`, `cnn_positions`,
`cnn_vectors`, `cnn_vectors_decoder`, `uniform`, `dynamic`) changes one
thing per step on the same stem, so what each change adds is the
difference between a step and the step below it — not whether the two
steps differ from a common reference. `ladder_tests` tests each upper
step against the step below it on every column with the tests of
`comparison_significance.reference_tests` (paired t-test and exact
sign-flip over seeds, McNemar per seed pair, and TOST with a margin), the
t-tests and the equivalence tests Holm-corrected over the ladder's step ×
column grid, a family of their own.
"""

from keras_caps.compare import comparison_significance as significance
from keras_caps.compare.compared_models import ladder_steps


def ladder_tests(aggregated, runs, keys, margin=None):
    """Each step of the ladder against the step below it.

    Args:
        aggregated, runs, keys, margin: as for
            `comparison_significance.reference_tests`.

    Returns:
        dict or `None` (fewer than two ladder steps compared):
        `"steps"` (the `[lower, upper]` pairs, in ladder order),
        `"num_tests"`, `"margin"` and `"models"`: per step
        (`"upper - lower"`) and column key, the cell of
        `reference_tests`, its difference upper minus lower.

    Example:

    ```python
    ladder = ladder_tests(results["routers"], results["models"],
                          ["clean", "noise:0.2"], margin=0.005)
    ladder["models"]["uniform - cnn_vectors_decoder"]["clean"]["holds"]
    ```
    """
    steps = ladder_steps(list(aggregated))
    if not steps:
        return None
    predictions = {(run["router"], run["seed"]):
                   significance.run_predictions(run) for run in runs}
    tests = {step_name(lower, upper): {
        key: significance.column_tests(aggregated, predictions, upper,
                                       lower, key, margin)
        for key in keys} for lower, upper in steps}
    significance.correct_by_holm(tests)
    significance.correct_equivalence_by_holm(tests)
    return {"steps": [list(step) for step in steps], "margin": margin,
            "num_tests": sum(cell["t_test"]["p_value"] is not None
                             for row in tests.values()
                             for cell in row.values()),
            "models": tests}


def step_name(lower, upper):
    """`"uniform - cnn_vectors_decoder"`: the difference a step tests.

    Example:

    >>> step_name("uniform", "dynamic")
    'dynamic - uniform'
    """
    return f"{upper} - {lower}"


def ladder_markdown(ladder, titles):
    """The ladder's table and note for `results.md` (no lines without a
    ladder)."""
    if ladder is None:
        return []
    lines = ["", "The control ladder, each step against the step below it "
             "(difference = upper step minus lower step, in points):", ""]
    lines += significance.tests_table(ladder, titles)
    return lines + ["", (
        "Ladder: `*` on a Holm p-value: the step's difference holds after "
        f"Holm's correction over the ladder's {ladder['num_tests']} step × "
        "column t-tests, a family apart from the tests against the "
        "reference (and their equivalence tests likewise); each step "
        "changes one thing, so its row is what that change adds here.")]
