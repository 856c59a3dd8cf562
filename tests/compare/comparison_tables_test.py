"""The costs and collapse tables of a comparison's results.md and csv."""

import csv
import io

import pytest

from keras_caps.compare import comparison
from keras_caps.compare import comparison_tables

_COLUMNS = [("clean", "clean"), ("noise:0.4", "noise std 0.4")]


def _row(**entries):
    return {"trainable_parameters": 161664,
            "trainable_parameters_with_decoder": 1573008,
            "multiply_adds": 30143104, "decoder_multiply_adds": 1409024,
            "steady_ms_per_step": 61.25, "peak_memory_mb": 2048.4,
            "peak_memory_per_model": True,
            "majority_share": {"clean": {"mean": 0.114},
                               "noise:0.4": {"mean": 0.996}},
            **entries}


@pytest.mark.single_backend
def test_costs_table_by_hand():
    routers = {"dynamic": _row(),
               "cnn": _row(trainable_parameters=161834,
                           trainable_parameters_with_decoder=161834,
                           decoder_multiply_adds=None,
                           peak_memory_per_model=False),
               "old": {"trainable_parameters": 5}}  # an earlier record
    lines = comparison_tables.costs_markdown(routers)
    assert lines[5:8] == [
        "| dynamic | 161,664 | 1,573,008 | 30,143,104 | 1,409,024 | 61.2 | "
        "2,048 |",
        "| cnn | 161,834 | 161,834 | 30,143,104 | n/a | 61.2 | 2,048 † |",
        "| old | 5 | n/a | n/a | n/a | n/a | n/a |"]
    assert lines[-1].endswith(": cnn.")
    # Nothing to show: no table at all.
    assert comparison_tables.costs_markdown({"old": {}}) == []


@pytest.mark.single_backend
def test_collapse_table_with_and_without_adapted_statistics():
    routers = {"cnn": _row()}
    lines = comparison_tables.collapse_markdown(routers, _COLUMNS)
    assert lines[3:] == ["| model | clean | noise std 0.4 |",
                         "|---|---:|---:|", "| cnn | 0.11 | 1.00 |"]
    routers["cnn"]["adapted_accuracy"] = {
        "clean": {"mean": 0.9471, "low": 0.94, "high": 0.9542},
        "noise:0.4": {"mean": 0.7108}}
    routers["cnn"]["adapted_majority_share"] = {
        "clean": {"mean": 0.12}, "noise:0.4": {"mean": 0.16}}
    routers["old"] = {}
    lines = comparison_tables.collapse_markdown(routers, _COLUMNS)
    assert lines[5:7] == ["| cnn | 0.11 | 1.00 |", "| old | n/a | n/a |"]
    assert lines[-2:] == [
        "| cnn | 94.71 [94.00, 95.42] (0.12) | 71.08 (0.16) |",
        "| old | n/a | n/a |"]
    assert comparison_tables.collapse_markdown({"old": {}}, _COLUMNS) == []


@pytest.mark.single_backend
def test_csv_cells_follow_the_header():
    header = comparison_tables.csv_header(_COLUMNS)
    cells = comparison_tables.csv_cells(_row(), _COLUMNS)
    assert dict(zip(header, cells, strict=True)) == {
        "trainable_parameters_with_decoder": "1573008",
        "multiply_adds": "30143104", "decoder_multiply_adds": "1409024",
        "steady_ms_per_step": "61.25", "peak_memory_mb": "2048.4",
        "clean_majority_share": "0.114",
        "noise:0.4_majority_share": "0.996",
        "clean_adapted_mean": "", "noise:0.4_adapted_mean": ""}


@pytest.mark.single_backend
def test_the_comparison_table_carries_them():
    accuracy = {"mean": 0.97, "std": 0.0, "low": None, "high": None}
    row = _row(num_seeds=1, train_ms_per_step=70.0, speed_seeds=[0],
               images_per_second=1000.0, macro_accuracy=accuracy,
               accuracy={"clean": accuracy})
    results = {
        "settings": {"dataset": "mnist", "seeds": [0], "epochs": 1,
                     "steps_per_epoch": 2, "batch_size": 16,
                     "validation": "holdout", "reconstruction": True,
                     "evaluation_seed": 1,
                     "corruptions": {"noise": [], "pixels": [],
                                     "occlusion": [], "affine": False}},
        "models": [{"hardware": "a CPU"}], "routers": {"dynamic": row}}
    markdown = comparison.results_markdown(results)
    assert ("| dynamic | 161,664 | 1,573,008 | 30,143,104 | 1,409,024 | "
            "61.2 | 2,048 |") in markdown
    assert "| dynamic | 0.11 |" in markdown
    table = list(csv.DictReader(io.StringIO(comparison.results_csv(results))))
    assert table[0]["multiply_adds"] == "30143104"
    assert table[0]["clean_majority_share"] == "0.114"
