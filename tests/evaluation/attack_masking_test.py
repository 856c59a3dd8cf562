"""The gradient-masking checks on hand-written attack results: each check
passes on a sound record and fails on one built to break it."""

import pytest

from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison_attacks
from keras_caps.compare import comparison_results
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attack_evaluation


def _sound():
    """Accuracies of an unmasked model, written by hand: falling with
    epsilon, PGD below FGSM, the transfer above white-box PGD, PGD at
    the large epsilon 0.5 at 2 %."""
    return {"clean": {"accuracy": 0.99},
            "fgsm": {"0.05": 0.80, "0.1": 0.55, "0.2": 0.30},
            "pgd": {"0.1": 0.20, "0.5": 0.02},
            "vote_pgd": {"0.1": 0.05},
            "transfer_pgd": {"0.1": 0.70}}


def _results(record, **kwargs):
    result = attack_checks.masking_checks(record, **kwargs)
    return result, {(check["check"], check["attack"]): check["passed"]
                    for check in result["checks"]}


@pytest.mark.single_backend
def test_sound_record_passes_every_check():
    result, passed = _results(_sound())
    assert result["passed"]
    assert passed == {("non_increasing", "fgsm"): True,
                      ("non_increasing", "pgd"): True,
                      ("non_increasing", "vote_pgd"): True,
                      ("near_zero", "pgd"): True,
                      ("pgd_below_fgsm", "pgd"): True,
                      ("transfer_above_white_box", "transfer_pgd"): True}
    near_zero = [check for check in result["checks"]
                 if check["check"] == "near_zero"][0]
    assert near_zero["text"] == "PGD at epsilon 0.5: 0.0200 <= 0.1"


@pytest.mark.single_backend
def test_each_check_fails_on_its_own_violation():
    cases = {
        # FGSM rises from 0.1 to 0.2: a sign of masking.
        ("non_increasing", "fgsm"): {"fgsm": {"0.05": 0.80, "0.1": 0.55,
                                              "0.2": 0.60}},
        # An attack above the clean accuracy (epsilon 0 is clean).
        ("non_increasing", "vote_pgd"): {"vote_pgd": {"0.1": 0.995}},
        ("near_zero", "pgd"): {"pgd": {"0.1": 0.20, "0.5": 0.11}},
        ("pgd_below_fgsm", "pgd"): {"pgd": {"0.1": 0.56, "0.5": 0.02}},
        ("transfer_above_white_box", "transfer_pgd"): {
            "transfer_pgd": {"0.1": 0.19}},
    }
    # A transfer attack above clean accuracy is no sign of masking in
    # this model (its perturbations were made on another one).
    assert attack_checks.masking_checks(
        {**_sound(), "transfer_pgd": {"0.1": 0.995}})["passed"]
    for failing, change in cases.items():
        result, passed = _results({**_sound(), **change})
        assert not result["passed"], failing
        assert [key for key, ok in passed.items() if not ok] == [failing]


@pytest.mark.single_backend
def test_boundaries_and_tolerance():
    # Equal values pass (never rises, never above); 0.10 is near zero.
    record = {"clean": {"accuracy": 0.5}, "fgsm": {"0.1": 0.5},
              "pgd": {"0.1": 0.5, "0.5": 0.1}}
    assert attack_checks.masking_checks(record)["passed"]
    record["pgd"]["0.1"] = 0.51
    result, passed = _results(record)
    assert not passed[("pgd_below_fgsm", "pgd")]
    assert "epsilon 0.1: pgd 0.5100 > fgsm 0.5000" in [
        check["text"] for check in result["checks"]]
    assert _results(record, tolerance=0.02)[0]["passed"]
    # Another near-zero threshold, another large epsilon.
    assert not _results(record, near_zero=0.05)[1][("near_zero", "pgd")]
    _, passed = _results(record, large_epsilon=None)  # the largest: 0.5
    assert passed[("near_zero", "pgd")]
    _, passed = _results(record, large_epsilon=0.3)  # not evaluated
    assert not passed[("near_zero", "pgd")]


@pytest.mark.single_backend
def test_checks_without_their_results_are_left_out():
    result = attack_checks.masking_checks(
        {"clean": {"accuracy": 0.9}, "fgsm": {"0.1": 0.3}})
    assert [check["check"] for check in result["checks"]] == [
        "non_increasing"]
    assert attack_checks.masking_checks(
        {"clean": {"accuracy": 0.9}}) == {"passed": True, "checks": []}
    with pytest.raises(ValueError, match="near_zero"):
        attack_checks.masking_checks(_sound(), near_zero=2)


@pytest.mark.single_backend
def test_summary_table_and_mark_over_seeds():
    failing = {**_sound(), "pgd": {"0.1": 0.20, "0.5": 0.15},
               "fgsm": {"0.05": 0.80, "0.1": 0.55, "0.2": 0.60}}
    settings = {"attacks": attack_evaluation.check_attacks(
        {"fgsm": [0.05, 0.1, 0.2], "pgd": [0.1]})}
    settings = ComparisonSettings.from_record(settings)
    rows = {name: comparison_attacks.masking_summary(evaluations, settings)
            for name, evaluations in (("dynamic", [_sound(), failing]),
                                      ("cnn", [_sound(), _sound()]))}
    assert not rows["dynamic"]["masking_checks"]["passed"]
    assert rows["cnn"]["masking_checks"]["passed"]
    near_zero = rows["dynamic"]["masking_checks"]["checks"]["near_zero"]
    assert (near_zero["passed"], near_zero["failed"]) == (1, 1)
    assert attack_checks.row_mark(rows["dynamic"]) == " ⚠"
    assert attack_checks.row_mark(rows["cnn"]) == ""
    lines = attack_checks.masking_markdown(rows)
    assert lines[3] == ("| model | non-increasing in ε | near 0 at large ε "
                        "| PGD ≤ FGSM | transfer ≥ white-box |")
    # Per seed: the second seed fails two checks, each counted once.
    assert lines[5] == ("| dynamic ⚠ | FAIL (1 of 2 seeds) | FAIL (1 of 2 "
                        "seeds) | pass | pass |")
    assert lines[6] == "| cnn | pass | pass | pass | pass |"
    assert lines[-2:] == [
        "- dynamic: accuracy rises with epsilon (fgsm 0.1 -> 0.2: 0.5500 "
        "-> 0.6000)", "- dynamic: PGD at epsilon 0.5: 0.1500 > 0.1"]
    assert comparison_attacks.masking_summary([_sound()],
                                              ComparisonSettings()) == {}


@pytest.mark.single_backend
def test_attack_settings_and_columns():
    attacks = attack_evaluation.check_attacks(
        {"fgsm": [0.2, 0.05], "pgd": [0.1], "vote": True})
    assert attacks == {"fgsm": [0.05, 0.2], "pgd": [0.1], "pgd_steps": 10,
                       "pgd_restarts": 1, "loss": "score_margin", "vote": True,
                       "large_epsilon": 0.5}
    assert [key for key, _ in attack_evaluation.attack_columns(
        attacks, transfer=True)] == [
        "fgsm:0.05", "fgsm:0.2", "pgd:0.1", "pgd:0.5", "vote_pgd:0.1",
        "transfer_pgd:0.1"]
    # The large epsilon among the asked ones: one column; none: no run.
    assert attack_evaluation.pgd_epsilons(
        {**attacks, "pgd": [0.1, 0.5]}) == [0.1, 0.5]
    assert attack_evaluation.pgd_epsilons(
        {**attacks, "large_epsilon": None}) == [0.1]
    assert attack_evaluation.check_attacks({"fgsm": [], "pgd": []}) is None
    for bad, message in (
            ({"fgsm": [-0.1]}, r"`fgsm`, expected epsilons in \[0, 1\]"),
            ({"pgd": [1.5]}, r"`pgd`, expected epsilons in \[0, 1\]"),
            ({"pgd": [0.1, 0.1]}, "duplicate epsilons"),
            ({"pgd": [0.1], "pgd_steps": 0}, "`pgd_steps`"),
            ({"pgd": [0.1], "pgd_restarts": 0}, "`pgd_restarts`"),
            ({"fgsm": [0.1], "vote": True}, "vote attack runs at the PGD"),
            ({"pgd": [0.1], "loss": "hinge"}, "`loss`"),
            ({"pgd": [0.1], "large_epsilon": 0}, "`large_epsilon`"),
            ({"pgd": [0.1], "norm": "l2"}, "unknown keys")):
        with pytest.raises(ValueError, match=message):
            attack_evaluation.check_attacks(bad)


@pytest.mark.single_backend
def test_accuracy_against_epsilon_series(tmp_path):
    def cell(mean, std=0.0):
        return {"mean": mean, "std": std}

    settings = {"corruptions": {"noise": [0.1], "pixels": [],
                                "occlusion": [], "affine": False},
                "routers": ["dynamic", "cnn"],
                "attacks": attack_evaluation.check_attacks(
                    {"fgsm": [0.2, 0.1], "pgd": [0.1], "vote": True})}
    accuracy = {"clean": cell(0.99), "noise:0.1": cell(0.9),
                "fgsm:0.1": cell(0.5, 0.1), "fgsm:0.2": cell(0.3),
                "pgd:0.1": cell(0.2), "pgd:0.5": cell(0.0),
                "vote_pgd:0.1": cell(0.1), "transfer_pgd:0.1": cell(0.6)}
    results = {"settings": settings,
               "routers": {"dynamic": {"accuracy": accuracy},
                           "cnn": {"accuracy": accuracy}}}
    series = comparison_attacks.epsilon_series(results)
    # The transfer panel: "cnn" is among the models, PGD is given.
    assert list(series) == ["fgsm", "pgd", "vote_pgd", "transfer_pgd"]
    assert series["fgsm"]["dynamic"] == {"epsilon": [0.0, 0.1, 0.2],
                                         "mean": [0.99, 0.5, 0.3],
                                         "std": [0.0, 0.1, 0.0]}
    assert series["pgd"]["cnn"]["epsilon"] == [0.0, 0.1, 0.5]
    assert series["transfer_pgd"]["cnn"]["mean"] == [0.99, 0.6]
    path = str(tmp_path / "accuracy_vs_epsilon.png")
    assert comparison_attacks.plot_accuracy_vs_epsilon(results, path) == path
    with open(path, "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    # Without attacks: no panel, no file.
    del settings["attacks"]
    assert comparison_attacks.epsilon_series(results) == {}
    assert comparison_attacks.plot_accuracy_vs_epsilon(
        results, str(tmp_path / "none.png")) is None
    assert not (tmp_path / "none.png").exists()
    assert [key for key, _ in comparison_results.columns(
        ComparisonSettings.from_record(settings))] == [
        "clean", "noise:0.1"]
