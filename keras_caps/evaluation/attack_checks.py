"""Gradient-masking checks on one model's adversarial accuracies.

An attack that looks weak may only have been given useless gradients
(saturated scores, routing iterations that obscure the gradient, ...):
Athalye, Carlini & Wagner ("Obfuscated gradients give a false sense of
security", ICML 2018, section 3.1) and Carlini et al. ("On evaluating
adversarial robustness", 2019, section 5) list the signs that an
evaluation is broken. `masking_checks(record)` runs four of them on an
evaluation record (`keras_caps.evaluation.evaluate_robustness(...,
attacks=...)`, or a model of `keras-caps compare`), each reported as
pass / fail with the numbers it compared:

- `"non_increasing"` (per white-box attack: FGSM, PGD, the vote attack):
  accuracy never rises with epsilon, the clean accuracy counting as
  epsilon 0 (a larger ball holds every image of a smaller one). Not for
  the transfer attack, which is not optimised against the model:
  perturbations made on another model may leave more of its images right
  than clean ones, and say nothing of its gradients;
- `"near_zero"`: PGD at the large epsilon (`LARGE_EPSILON` = 0.5 of the
  pixel range in L-inf by default, a run of its own: at 0.5 every image
  can be turned into a uniform mid-grey one, so a working attack leaves
  almost nothing right) leaves at most `NEAR_ZERO` = 10 % of the images
  right (Athalye et al., section 3.1: an attack that does not succeed
  even without a bound is a sign of masking);
- `"pgd_below_fgsm"`: iterative PGD is never weaker than single-step FGSM
  at the same epsilon (Athalye et al., section 3.1: a single-step attack
  doing better than an iterative one is a sign of masking);
- `"transfer_above_white_box"`: PGD perturbations made on another model
  (the comparison's CNN baseline), a black-box attack, never do better
  than the white-box PGD at the same epsilon (Athalye et al., section
  3.1).

A check without the results it needs (no FGSM, no transfer, ...) is left
out, not passed. Accuracies are compared as they are, with `tolerance`
(default 0): on a finite test set a difference of one image is reported.

The evaluation record's attack entries are those of
`keras_caps.evaluation.attack_evaluation`: `"fgsm"`, `"pgd"`,
`"vote_pgd"`, `"transfer_pgd"`, each epsilon (as a string, `"0.1"`) ->
accuracy.
"""

import math

# The attacks an evaluation record may hold, as its keys.
ATTACK_KINDS = ("fgsm", "pgd", "vote_pgd", "transfer_pgd")
WHITE_BOX_KINDS = ("fgsm", "pgd", "vote_pgd")
LARGE_EPSILON = 0.5
NEAR_ZERO = 0.1
CHECKS = ("non_increasing", "near_zero", "pgd_below_fgsm",
          "transfer_above_white_box")
CHECK_TITLES = {"non_increasing": "non-increasing in ε",
                "near_zero": "near 0 at large ε",
                "pgd_below_fgsm": "PGD ≤ FGSM",
                "transfer_above_white_box": "transfer ≥ white-box"}
FAILED_MARK = " ⚠"


def masking_checks(record, *, large_epsilon=LARGE_EPSILON,
                   near_zero=NEAR_ZERO, tolerance=0.0):
    """The gradient-masking checks of one model's evaluation.

    Args:
        record: dict. An evaluation record: `"clean": {"accuracy": ...}`
            and any of `ATTACK_KINDS`, each epsilon string -> accuracy
            (attacks on a subset of the test images, `"attacks":
            {"attack_images": N, "clean_accuracy_subset": ...}`: the
            clean accuracy of that subset is the epsilon-0 point, see
            `clean_reference`).
        large_epsilon: float or `None`. The epsilon of the `"near_zero"`
            check (a `"pgd"` entry); `None`: the largest PGD epsilon
            evaluated.
        near_zero: float. The largest accuracy that passes `"near_zero"`.
            Defaults to `0.1`.
        tolerance: float. How much an accuracy may exceed the one it
            should not exceed. Defaults to `0`.

    Returns:
        dict: `"passed"` (every check passed; `True` when none ran) and
        `"checks"`: a list of `{"check", "attack", "passed", "text",
        "values"}`, `"text"` saying what was compared with the numbers
        (accuracies as fractions), `"values"` the accuracies compared.

    Example:

    >>> record = {"clean": {"accuracy": 0.99},
    ...           "fgsm": {"0.1": 0.60, "0.2": 0.70},
    ...           "pgd": {"0.1": 0.20, "0.5": 0.0}}
    >>> result = masking_checks(record)
    >>> result["passed"]
    False
    >>> [(c["check"], c["attack"], c["passed"]) for c in result["checks"]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('non_increasing', 'fgsm', False), ('non_increasing', 'pgd', True),
     ('near_zero', 'pgd', True), ('pgd_below_fgsm', 'pgd', True)]
    """
    for name, value in (("near_zero", near_zero), ("tolerance", tolerance)):
        if not is_fraction(value):
            raise ValueError(
                f"Received an invalid value for `{name}`, expected a "
                f"fraction in [0, 1]. Received: {name}={value!r}")
    attacks = {kind: _by_epsilon(record.get(kind)) for kind in ATTACK_KINDS}
    checks = []
    clean = clean_reference(record)
    for kind in WHITE_BOX_KINDS:
        if attacks[kind]:
            checks.append(_non_increasing(kind, clean, attacks[kind],
                                          tolerance))
    if attacks["pgd"]:
        checks.append(_near_zero(attacks["pgd"], large_epsilon, near_zero))
    checks += _pairs("pgd_below_fgsm", attacks["pgd"], attacks["fgsm"],
                     tolerance)
    checks += _pairs("transfer_above_white_box", attacks["pgd"],
                     attacks["transfer_pgd"], tolerance)
    return {"passed": all(check["passed"] for check in checks),
            "checks": checks}


def clean_reference(record):
    """The clean accuracy the attack accuracies of `record` start from
    (epsilon 0): that of the attacked images, `"clean_accuracy_subset"`
    of `record["attacks"]` when the attacks ran on the first N test images
    only (`keras_caps.evaluation.attack_evaluation`'s `"attack_images"`);
    else (every image, or a record made before subsets existed) the
    clean accuracy of the test set.

    Example:

    >>> clean_reference({"clean": {"accuracy": 0.9},
    ...                  "attacks": {"attack_images": 100,
    ...                              "clean_accuracy_subset": 0.95}})
    0.95
    """
    subset = (record.get("attacks") or {}).get("clean_accuracy_subset")
    return record["clean"]["accuracy"] if subset is None else subset


def _by_epsilon(entry):
    """`{"0.1": acc}` -> `{0.1: acc}` sorted by epsilon (no `None`s)."""
    return dict(sorted((float(epsilon), accuracy)
                       for epsilon, accuracy in (entry or {}).items()
                       if accuracy is not None))


def _non_increasing(kind, clean, accuracies, tolerance):
    points = [(0.0, clean)] + [(epsilon, accuracy) for epsilon, accuracy
                               in accuracies.items() if epsilon > 0]
    rises = [f"{kind} {low:g} -> {high:g}: {before:.4f} -> {after:.4f}"
             for (low, before), (high, after) in zip(points, points[1:])
             if after > before + tolerance]
    series = ", ".join(f"{epsilon:g}: {accuracy:.4f}"
                       for epsilon, accuracy in points)
    text = (f"accuracy rises with epsilon ({'; '.join(rises)})" if rises
            else f"{kind} accuracy never rises with epsilon ({series})")
    return {"check": "non_increasing", "attack": kind, "passed": not rises,
            "text": text, "values": {f"{epsilon:g}": accuracy
                                     for epsilon, accuracy in points}}


def _near_zero(accuracies, large_epsilon, near_zero):
    if large_epsilon is None:
        large_epsilon = max(accuracies)
    accuracy = accuracies.get(float(large_epsilon))
    if accuracy is None:
        return {"check": "near_zero", "attack": "pgd", "passed": False,
                "text": f"no PGD accuracy at the large epsilon "
                f"{large_epsilon:g} to check", "values": {}}
    passed = accuracy <= near_zero
    relation = "<=" if passed else ">"
    return {"check": "near_zero", "attack": "pgd", "passed": passed,
            "text": f"PGD at epsilon {large_epsilon:g}: {accuracy:.4f} "
            f"{relation} {near_zero:g}",
            "values": {f"{large_epsilon:g}": accuracy}}


def _pairs(check, lower, upper, tolerance):
    """One check per epsilon both attacks share: `lower`'s accuracy must
    not exceed `upper`'s (`"pgd_below_fgsm"`: PGD below FGSM;
    `"transfer_above_white_box"`: white-box PGD below the transfer)."""
    shared = sorted(set(lower) & set(upper))
    if not shared:
        return []
    lower_name, upper_name = (("pgd", "fgsm") if check == "pgd_below_fgsm"
                              else ("white-box pgd", "transfer pgd"))
    failures = [epsilon for epsilon in shared
                if lower[epsilon] > upper[epsilon] + tolerance]
    shown = failures or shared
    text = "; ".join(
        f"epsilon {epsilon:g}: {lower_name} {lower[epsilon]:.4f} "
        f"{'>' if epsilon in failures else '<='} {upper_name} "
        f"{upper[epsilon]:.4f}" for epsilon in shown)
    return [{"check": check,
             "attack": "pgd" if check == "pgd_below_fgsm" else "transfer_pgd",
             "passed": not failures, "text": text,
             "values": {f"{epsilon:g}": [lower[epsilon], upper[epsilon]]
                        for epsilon in shared}}]


def summarize(results):
    """Per check name, over several evaluations (a model's seeds).

    Args:
        results: list of `masking_checks` results (one per seed), or of
            `None` (an evaluation without attacks).

    Returns:
        dict: `"passed"` (every check of every evaluation passed),
        `"checks"`: check name -> `{"passed": n, "failed": n, "texts":
        [the failing checks' texts]}`, for the names that ran: the
        evaluations (seeds) in which every check of that name (over the
        attacks and epsilons) passed, those in which one failed.

    Example:

    >>> one = {"passed": True, "checks": [{"check": "near_zero",
    ...        "passed": True, "text": "ok"}]}
    >>> summarize([one, one])["checks"]["near_zero"]["passed"]
    2
    """
    summary = {}
    for result in results:
        by_name = {}
        for check in (result or {}).get("checks", []):
            by_name.setdefault(check["check"], []).append(check)
        for name, checks in by_name.items():
            entry = summary.setdefault(
                name, {"passed": 0, "failed": 0, "texts": []})
            failed = [check["text"] for check in checks
                      if not check["passed"]]
            entry["failed" if failed else "passed"] += 1
            entry["texts"] += failed
    ordered = {name: summary[name] for name in CHECKS if name in summary}
    return {"passed": all(entry["failed"] == 0
                          for entry in ordered.values()),
            "checks": ordered}


def row_mark(row):
    """`FAILED_MARK` for an aggregated row whose masking checks failed,
    else `""` (no checks, or all passed)."""
    summary = row.get("masking_checks")
    return FAILED_MARK if summary and not summary["passed"] else ""


def masking_markdown(routers):
    """The masking-checks table of a comparison's `results.md`, or `[]`.

    Args:
        routers: dict. `results["routers"]`: each row's
            `"masking_checks"` (`summarize` over its seeds).

    Example:

    >>> row = {"masking_checks": {"passed": False, "checks": {
    ...     "near_zero": {"passed": 1, "failed": 1,
    ...                   "texts": ["PGD at epsilon 0.5: 0.3 > 0.1"]}}}}
    >>> masking_markdown({"dynamic": row})[5]
    '| dynamic ⚠ | FAIL (1 of 2 seeds) |'
    """
    rows = {name: row["masking_checks"] for name, row in routers.items()
            if row.get("masking_checks") and row["masking_checks"]["checks"]}
    if not rows:
        return []
    names = [name for name in CHECKS
             if any(name in summary["checks"] for summary in rows.values())]
    lines = ["", "Gradient-masking checks (Athalye et al. 2018, Carlini et "
             "al. 2019), per model over its seeds: white-box accuracy "
             "never rises with ε; PGD at the large ε leaves at most "
             f"{NEAR_ZERO:.0%} right; PGD never above FGSM; the transfer "
             "attack (PGD made on cnn) never below white-box PGD. "
             f"A model failing one is marked{FAILED_MARK}.", "",
             "| model | " + " | ".join(CHECK_TITLES[name] for name in names)
             + " |", "|---|" + "---|" * len(names)]
    failures = []
    for model, summary in rows.items():
        cells = [model + (FAILED_MARK if not summary["passed"] else "")]
        for name in names:
            entry = summary["checks"].get(name)
            if entry is None:
                cells.append("n/a")
            elif entry["failed"]:
                total = entry["passed"] + entry["failed"]
                cells.append(f"FAIL ({entry['failed']} of {total} seeds)")
                failures += [f"- {model}: {text}" for text in entry["texts"]]
            else:
                cells.append("pass")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + ([""] + failures if failures else [])


def is_fraction(value):
    """Whether `value` is a real number in [0, 1] (not a bool or NaN)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and not math.isnan(value) and 0 <= value <= 1)
