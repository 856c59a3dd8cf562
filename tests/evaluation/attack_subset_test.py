"""Attacks on the first N test images (`attack_images`,
`--attack-images N`): the attack columns, the masking checks' clean
reference, the per-image pairing and the command-line flag."""

import json
import os

import keras
import numpy as np
import pytest
from scipy import stats as scipy_stats

from keras_caps import cli
from keras_caps.applications import CNNBaseline
from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison_significance as significance
from keras_caps.evaluation import attack_checks
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import attacks as attacks_lib
from keras_caps.evaluation import evaluate_robustness
from keras_caps.evaluation import predictions as predictions_lib
from keras_caps.evaluation import read_predictions
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

_SUBSET = 6
# `synthetic_digits`: class k is a bright bar at rows 2k+4 and 2k+5; a
# model reading the bars gets every image right whose label is its bar's.
_WRONG = (7, 9, 11)  # Test images given another label than their bar.


def _bar_model():
    """logit_k = 0.05 * (sum of bar k's pixels) / 255: right on every
    synthetic digit (its weights `(784, 10)` read each class's bar)."""
    kernel = np.zeros((28, 28, 10), "float32")
    for label in range(10):
        kernel[2 * label + 4:2 * label + 6, 4:24, label] = 0.05
    inputs = keras.Input((28, 28, 1))
    flat = keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(inputs))
    logits = keras.layers.Dense(10, name="logits")(flat)
    model = keras.Model(inputs, logits)
    model.get_layer("logits").set_weights([kernel.reshape(784, 10),
                                           np.zeros(10, "float32")])
    return model


@pytest.fixture(scope="module")
def test_data(tmp_path_factory):
    """12 test digits, the first 6 labelled by their bar, 3 of the last 6
    not: clean accuracy 1.0 on the subset, 0.75 on the whole set."""
    digits, labels = synthetic_digits(12, seed=1)
    labels = labels.copy()
    labels[list(_WRONG)] = (labels[list(_WRONG)] + 1) % 10
    folder = write_idx_dataset(str(tmp_path_factory.mktemp("mnist")),
                               synthetic_digits(20, seed=0),
                               (digits, labels))
    return folder, digits[..., None].astype("float32"), labels


def test_subset_accuracies_are_those_of_the_first_images(test_data,
                                                         tmp_path):
    data_dir, images, labels = test_data
    model = _bar_model()
    attacks = {"fgsm": [0.1], "pgd": [0.05], "pgd_steps": 2,
               "loss": "cross_entropy", "attack_images": _SUBSET}
    record = evaluate_robustness(
        model, "mnist", data_dir=data_dir, seed=3, batch_size=8,
        predictions_dir=str(tmp_path), adapt_batchnorm=True,
        attacks=attacks)
    assert record["clean"]["accuracy"] == 0.75  # 9 of 12
    # Independently: the attacks' own function on images[:N], with the
    # seed the evaluation documents (seed + 1000 * offset + position).
    first, truth = images[:_SUBSET], labels[:_SUBSET]
    common = dict(loss="cross_entropy", batch_size=8, steps=2)
    expected = {
        ("fgsm", "0.1"): attacks_lib.attack_accuracy(
            model, first, truth, epsilon=0.1, method="fgsm",
            seed=3 + 5000, **common),
        ("pgd", "0.05"): attacks_lib.attack_accuracy(
            model, first, truth, epsilon=0.05, method="pgd",
            seed=3 + 6000, **common),
        ("pgd", "0.5"): attacks_lib.attack_accuracy(
            model, first, truth, epsilon=0.5, method="pgd",
            seed=3 + 6001, **common)}
    for (kind, epsilon), accuracy in expected.items():
        assert record[kind][epsilon] == accuracy, (kind, epsilon)
    # FGSM at 0.1 leaves every bar image right (the closed form of
    # attack_evaluation_test): above the whole set's clean 0.75.
    assert record["fgsm"]["0.1"] == 1.0
    assert record["attacks"]["attack_images"] == _SUBSET
    assert record["attacks"]["clean_accuracy_subset"] == 1.0
    assert record["masking_checks"] == attack_checks.masking_checks(
        {**record, "clean": {"accuracy": 1.0}})
    non_increasing = record["masking_checks"]["checks"][0]
    assert non_increasing["values"]["0"] == 1.0
    assert non_increasing["passed"]
    saved = read_predictions(str(tmp_path))
    np.testing.assert_array_equal(saved["labels:attacks"], truth)
    assert len(saved["labels"]) == len(saved["clean"]) == 12
    for key in ("fgsm:0.1", "pgd:0.05", "pgd:0.5", "adapted:pgd:0.05"):
        assert len(saved[key]) == _SUBSET, key
        assert significance.per_image_correct(
            str(tmp_path), key).tolist() == (saved[key] == truth).tolist()
    # The adapted columns are on the subset too (no BatchNorm here: the
    # same predictions).
    assert record["adapted"]["accuracy"]["pgd:0.05"] == record["pgd"]["0.05"]
    assert record["adapted"]["accuracy"]["clean"] == 0.75


def test_more_images_than_the_test_set_is_refused(test_data, tmp_path):
    data_dir, _, _ = test_data
    with pytest.raises(ValueError, match=r"`attack_images`, expected at "
                       r"most the 12 images.*attack_images=13"):
        evaluate_robustness(_bar_model(), "mnist", data_dir=data_dir,
                            predictions_dir=str(tmp_path),
                            attacks={"fgsm": [0.1], "attack_images": 13})
    assert os.listdir(tmp_path) == []


@pytest.mark.single_backend
def test_settings_and_older_records():
    # Without the option (or None), the settings have no such key: the
    # records of comparisons made before it stay equal to new ones.
    assert "attack_images" not in attack_evaluation.check_attacks(
        {"pgd": [0.1]})
    assert "attack_images" not in attack_evaluation.check_attacks(
        {"pgd": [0.1], "attack_images": None})
    assert attack_evaluation.check_attacks(
        {"pgd": [0.1], "attack_images": np.int64(5)})["attack_images"] == 5
    for bad in (0, -1, 1.5, True, "5"):
        with pytest.raises(ValueError, match="`attack_images`, expected an "
                           "integer >= 1"):
            attack_evaluation.check_attacks({"pgd": [0.1],
                                             "attack_images": bad})
    # A predictions file without "labels:attacks" (every image attacked,
    # or an older file) pairs its attack columns with "labels".
    assert predictions_lib.labels_of("pgd:0.1", {"labels": 0}) == "labels"
    assert predictions_lib.labels_of(
        "adapted:transfer_pgd:0.1", ["labels", "labels:attacks"]) == (
        "labels:attacks")
    assert predictions_lib.labels_of("noise:0.1", ["labels:attacks"]) == (
        "labels")


@pytest.mark.single_backend
def test_masking_check_uses_the_subset_clean_accuracy():
    # Whole-set clean 0.60, subset 0.90: FGSM 0.80 at 0.1 is a fall from
    # the subset's clean accuracy (pass), a rise from the whole set's.
    record = {"clean": {"accuracy": 0.60}, "fgsm": {"0.1": 0.80},
              "attacks": {"attack_images": 100,
                          "clean_accuracy_subset": 0.90}}
    check = attack_checks.masking_checks(record)["checks"][0]
    assert (check["passed"], check["values"]) == (
        True, {"0": 0.90, "0.1": 0.80})
    old = {"clean": {"accuracy": 0.60}, "fgsm": {"0.1": 0.80}}
    assert not attack_checks.masking_checks(old)["checks"][0]["passed"]
    # The other way round: whole set 0.95 would pass, the subset's 0.70
    # fails.
    record = {"clean": {"accuracy": 0.95}, "fgsm": {"0.1": 0.80},
              "attacks": {"attack_images": 100,
                          "clean_accuracy_subset": 0.70}}
    check = attack_checks.masking_checks(record)["checks"][0]
    assert not check["passed"]
    assert "0.7000 -> 0.8000" in check["text"]


@pytest.mark.single_backend
def test_mcnemar_pairs_the_attacked_images(tmp_path):
    """Two models' predictions on 10 test images, attacked on the first 6:
    McNemar's b and c count the 6 attacked images, paired by position."""
    labels = np.arange(10) % 10
    subset = labels[:_SUBSET]
    # Right (True) per attacked image: model a, the reference r.
    right = {"a": np.array([1, 1, 0, 1, 0, 1], bool),
             "r": np.array([1, 0, 0, 0, 0, 1], bool)}
    runs = []
    for name in right:
        folder = tmp_path / f"{name}_seed0"
        folder.mkdir()
        predictions_lib.write_predictions(str(folder), {
            "labels": labels, "clean": labels,
            "labels:attacks": subset,
            "pgd:0.1": np.where(right[name], subset, (subset + 1) % 10)}, 10)
        runs.append({"router": name, "seed": 0,
                     "model_path": str(folder / "model.keras")})
    aggregated = {name: {"per_seed": {"seeds": [0], "accuracy": {
        "clean": [1.0], "pgd:0.1": [float(right[name].mean())]}}}
        for name in right}
    tests = significance.reference_tests(aggregated, runs, "r",
                                         ["clean", "pgd:0.1"])
    mcnemar = tests["models"]["a"]["pgd:0.1"]["mcnemar"][0]
    b = int(np.sum(right["a"] & ~right["r"]))  # 2 (images 1 and 3)
    c = int(np.sum(~right["a"] & right["r"]))  # 0
    assert (mcnemar["b"], mcnemar["c"]) == (b, c) == (2, 0)
    assert mcnemar["p_value"] == pytest.approx(
        scipy_stats.binomtest(b, b + c, 0.5).pvalue)
    # A model whose attacks ran on every image is not paired with one
    # attacked on a subset.
    whole = tmp_path / "a_seed0"
    predictions_lib.write_predictions(str(whole), {
        "labels": labels, "clean": labels, "pgd:0.1": labels}, 10)
    tests = significance.reference_tests(aggregated, runs, "r",
                                         ["pgd:0.1"])
    assert tests["models"]["a"]["pgd:0.1"]["mcnemar"] == [None]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("model") / "model.keras")
    CNNBaseline("mnist", compile=True).save(path)
    return path


def _evaluate(saved_model, data_dir, folder, *flags):
    return cli.main(["evaluate", "--model-path", saved_model,
                     "--data-dir", data_dir, "--output",
                     str(folder / "metrics.json"), "--predictions-dir",
                     str(folder / "predictions"), *flags])


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "all"])
@pytest.mark.single_backend
def test_parser_refuses_bad_attack_images(value, saved_model, test_data,
                                          tmp_path, capsys):
    for command in ("evaluate", "compare"):
        with pytest.raises(SystemExit) as exit_info:
            if command == "evaluate":
                _evaluate(saved_model, test_data[0], tmp_path, "--pgd",
                          "0.1", "--attack-images", value)
            else:
                cli.main(["compare", "--output-dir", str(tmp_path / "c"),
                          "--pgd", "0.1", "--attack-images", value])
        assert exit_info.value.code == 2
        assert ("argument --attack-images: expected a positive integer"
                in capsys.readouterr().err)
        assert os.listdir(tmp_path) == []


@pytest.mark.single_backend
def test_commands_refuse_attack_images_they_cannot_honour(
        saved_model, test_data, tmp_path, capsys):
    data_dir = test_data[0]
    for flags, message in (
            (["--attack-images", "5"], "--attack-images set the attacks"),
            (["--pgd", "0.1", "--attack-images", "10001"],
             "--attack-images 10001 is more than the 10000 test images of "
             "'mnist'"),
            # The data folder holds 12 test images.
            (["--pgd", "0.1", "--attack-images", "13"],
             "expected at most the 12 images of the test set")):
        assert _evaluate(saved_model, data_dir, tmp_path, *flags) == 2
        assert message in capsys.readouterr().err
        assert os.listdir(tmp_path) == []
    output_dir = tmp_path / "compare"
    assert cli.main(["compare", "--output-dir", str(output_dir), "--pgd",
                     "0.1", "--attack-images", "10001"]) == 2
    assert "more than the 10000 test images" in capsys.readouterr().err
    assert not output_dir.exists()


def test_evaluate_command_attack_images(saved_model, test_data, tmp_path):
    data_dir, _, labels = test_data
    assert _evaluate(saved_model, data_dir, tmp_path, "--fgsm", "0.1",
                     "--pgd", "0.1", "--pgd-steps", "1",
                     "--masking-epsilon", "0", "--attack-images", "5") == 0
    with open(tmp_path / "metrics.json") as file:
        record = json.load(file)["robustness"]
    saved = read_predictions(str(tmp_path / "predictions"))
    assert record["attacks"]["attack_images"] == 5
    assert record["attacks"]["clean_accuracy_subset"] == float(
        np.mean(saved["clean"][:5] == labels[:5]))
    np.testing.assert_array_equal(saved["labels:attacks"], labels[:5])
    for key in ("fgsm:0.1", "pgd:0.1"):
        kind, epsilon = key.split(":")
        assert record[kind][epsilon] == float(
            np.mean(saved[key] == labels[:5]))


@pytest.mark.single_backend
def test_epsilon_zero_of_a_subset_is_its_clean_accuracy():
    from keras_caps.compare import comparison_attacks

    settings = {"corruptions": {"noise": [], "pixels": [], "occlusion": [],
                                "affine": False},
                "routers": ["dynamic"],
                "attacks": attack_evaluation.check_attacks(
                    {"pgd": [0.1], "large_epsilon": None,
                     "attack_images": 100})}
    # Two seeds: whole-set clean 0.60 and 0.70, subset 0.90 and 0.80.
    evaluations = [
        {"clean": {"accuracy": clean}, "pgd": {"0.1": 0.2},
         "attacks": {"attack_images": 100, "clean_accuracy_subset": subset}}
        for clean, subset in ((0.60, 0.90), (0.70, 0.80))]
    row = comparison_attacks.masking_summary(
        evaluations, ComparisonSettings.from_record(settings))
    assert row["attack_clean"]["per_seed"] == [0.90, 0.80]
    assert row["attack_clean"]["mean"] == pytest.approx(0.85)
    assert row["attack_clean"]["std"] == pytest.approx(
        np.std([0.90, 0.80], ddof=1))
    row["accuracy"] = {"clean": {"mean": 0.65, "std": 0.07},
                       "pgd:0.1": {"mean": 0.2, "std": 0.0}}
    series = comparison_attacks.epsilon_series(
        {"settings": settings, "routers": {"dynamic": row}})
    assert series["pgd"]["dynamic"]["epsilon"] == [0.0, 0.1]
    assert series["pgd"]["dynamic"]["mean"] == [pytest.approx(0.85), 0.2]
    # Every image attacked: no such entry, the clean column is epsilon 0.
    del settings["attacks"]["attack_images"]
    assert "attack_clean" not in comparison_attacks.masking_summary(
        evaluations, ComparisonSettings.from_record(settings))


@pytest.mark.single_backend
def test_relative_error_of_a_subset_column():
    # Clean 0.60 on the whole set, 0.90 on the 100 attacked images; PGD
    # 0.50: its error 0.50 over the subset's clean error 0.10 is 5.00
    # (over the whole set's 0.40 it would be 1.25); noise keeps the
    # whole set's: 0.52 / 0.40 = 1.30.
    row = {"accuracy": {"clean": {"mean": 0.60}, "noise:0.1": {"mean": 0.48},
                        "pgd:0.1": {"mean": 0.50}},
           "attack_clean": {"mean": 0.90}}
    titles = [("clean", "clean"), ("noise:0.1", "noise 0.1"),
              ("pgd:0.1", "PGD ε 0.1")]
    lines = significance.statistics_markdown({"routers": {"dynamic": row}},
                                             titles)
    assert lines[-1] == "| dynamic | 1.30 | 5.00 |"
    del row["attack_clean"]
    lines = significance.statistics_markdown({"routers": {"dynamic": row}},
                                             titles)
    assert lines[-1] == "| dynamic | 1.30 | 1.25 |"
