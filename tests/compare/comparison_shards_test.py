"""`compare --workers N` and `--shard K/N` (#22, item 5): shares of the
(model, seed) list fill one comparison folder, several models train at
once, and the table is written once every model is finished."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_caps import cli
from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison
from keras_caps.compare import comparison_process
from keras_caps.compare import comparison_settings
from keras_caps.compare.shards import check_workers
from keras_caps.compare.shards import parse_shard
from keras_caps.compare.shards import shard_models
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison

pytestmark = pytest.mark.single_backend


@pytest.mark.parametrize("shard, message", [
    ("3/2", "1 <= K <= N.*shard=3/2"),
    ("0/2", "shard=0/2"),
    ("1/0", "shard=1/0"),
    ("a/b", "expected K/N.*shard='a/b'"),
    ("2", "shard='2'"),
    ("1/2/3", "shard='1/2/3'"),
])
def test_bad_shards_are_refused_naming_them(shard, message):
    with pytest.raises(ValueError, match=message):
        parse_shard(shard)


def test_bad_shard_types_and_workers_are_refused():
    with pytest.raises(TypeError, match="shard"):
        parse_shard((1, 2, 3))
    with pytest.raises(TypeError, match="shard"):
        parse_shard((True, 2))
    with pytest.raises(ValueError, match="workers=0"):
        check_workers(0, "process")
    with pytest.raises(ValueError, match="isolation='session'"):
        check_workers(2, "session")
    with pytest.raises(TypeError, match="workers"):
        check_workers(1.5, "process")
    assert parse_shard(" 2 / 3 ") == (2, 3) == parse_shard((2, 3))
    assert parse_shard(None) is None


def test_shares_are_disjoint_cover_everything_and_are_fixed():
    models = [(router, seed) for router in ("a", "b", "c")
              for seed in (0, 1)]
    # Hand-worked: positions 0, 2, 4 and 1, 3, 5.
    assert shard_models(models, (1, 2)) == [("a", 0), ("b", 0), ("c", 0)]
    assert shard_models(models, (2, 2)) == [("a", 1), ("b", 1), ("c", 1)]
    for count in (1, 2, 4, 7):
        shares = [shard_models(models, (index, count))
                  for index in range(1, count + 1)]
        assert sorted(sum(shares, [])) == sorted(models)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert shard_models(models, None) == models


def test_the_cli_refuses_bad_shards_and_workers(tmp_path, capsys):
    output_dir = tmp_path / "compare"
    for flags, message in ((["--shard", "3/2"], "shard=3/2"),
                           (["--shard", "x"], "shard='x'"),
                           (["--workers", "0"], "--workers")):
        try:
            status = cli.main(["compare", "--output-dir", str(output_dir),
                               *flags])
        except SystemExit as exit:  # argparse's own refusal.
            status = exit.code
        assert status == 2
        assert message in capsys.readouterr().err
        assert not output_dir.exists()


# A stand-in for a model's process: records when it ran and the threads it
# was given, then succeeds, or fails with a report as a real child does.
_FAKE_CHILD = """import json, os, sys, time
arguments = json.loads(sys.argv[1])
task = arguments["task"]
start = time.time()
while task["after"] and not os.path.exists(task["after"]):
    time.sleep(0.01)
time.sleep(task["sleep"])
with open(task["folder"], "w") as file:
    json.dump({"start": start, "end": time.time(),
               "threads": os.environ.get("TF_NUM_INTRAOP_THREADS")}, file)
if task["fail"]:
    os.write(arguments["report_fd"], json.dumps(
        {"kind": "bad_input", "message": "boom"}).encode())
    sys.exit(2)
"""


def _fake_tasks(folder, sleeps, failing=(), after=None):
    """Fake tasks sleeping `sleeps`; `after[i]`: task i starts its sleep
    once task `after[i]` has written its record."""
    after = after or {}
    return [{"router": f"m{index}", "settings": {"seed": 0},
             "folder": str(folder / f"m{index}.json"), "sleep": sleep,
             "fail": index in failing,
             "after": (str(folder / f"m{after[index]}.json")
                       if index in after else None)}
            for index, sleep in enumerate(sleeps)]


def _intervals(tasks):
    spans = []
    for task in tasks:
        if os.path.exists(task["folder"]):
            with open(task["folder"]) as file:
                spans.append(json.load(file))
    return spans


def test_workers_run_that_many_processes_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(comparison_process, "_BOOTSTRAP", _FAKE_CHILD)
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    tasks = _fake_tasks(tmp_path, [0.6] * 5)
    comparison_process.train_and_evaluate_in_processes(
        tasks, workers=2, poll_seconds=0.02)
    spans = _intervals(tasks)
    assert len(spans) == 5
    # At each start, the processes running (independently, from the
    # recorded times): never more than 2, and 2 at some point.
    running = [sum(other["start"] <= span["start"] < other["end"]
                   for other in spans) for span in spans]
    assert max(running) == 2
    threads = str(max(1, (os.cpu_count() or 1) // 2))
    assert {span["threads"] for span in spans} == {threads}


def test_after_a_failure_no_process_starts_and_it_is_raised(tmp_path,
                                                            monkeypatch):
    monkeypatch.setattr(comparison_process, "_BOOTSTRAP", _FAKE_CHILD)
    # m1 runs on for 0.5 s after m0 failed, so m0's failure is seen
    # first, however loaded the machine.
    tasks = _fake_tasks(tmp_path, [0.05, 0.5, 0.05, 0.05], failing=(0,),
                        after={1: 0})
    with pytest.raises(ValueError, match="'m0' with seed 0 failed: boom"):
        comparison_process.train_and_evaluate_in_processes(
            tasks, workers=2, poll_seconds=0.02)
    # The running one finished (its model kept); the others never started.
    assert [os.path.exists(task["folder"]) for task in tasks] == [
        True, True, False, False]


def _compare(data_dir, output_dir, shard):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "KERAS_BACKEND": "tensorflow"}
    return subprocess.Popen(
        [sys.executable, "-m", "keras_caps.cli", "compare", "--routers",
         "cnn", "--seeds", "0,1", "--epochs", "1", "--steps-per-epoch", "2",
         "--batch-size", "8", "--no-reconstruction", "--noise", "0.3",
         "--isolation", "session", "--data-dir", str(data_dir),
         "--output-dir", str(output_dir), "--shard", shard],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_concurrent_shards_fill_one_comparison(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(64, seed=0),
                                 synthetic_digits(16, seed=1))
    output_dir = tmp_path / "compare"
    shards = [_compare(data_dir, output_dir, "1/2"),
              _compare(data_dir, output_dir, "2/2")]
    outputs = []
    for process in shards:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        outputs.append(out)
    # Each share trained its own model: seed 0 for 1/2, seed 1 for 2/2
    # (their run records were written once, by one process each).
    for seed in (0, 1):
        folder = comparison.run_dir(str(output_dir), "cnn", seed)
        with open(os.path.join(folder, "metrics.json")) as file:
            assert json.load(file)["seed"] == seed
    # The share that finished first says who writes the table; at least
    # the last one wrote it.
    written = ["| cnn |" in out for out in outputs]
    assert any(written)
    for out, wrote in zip(outputs, written, strict=True):
        assert wrote or "will be written by the share that finishes last" in (
            out)
    with open(output_dir / "results.json") as file:
        results = json.load(file)
    for name in ("results.md", "learning_curves.png"):
        assert (output_dir / name).exists()
    # The table is the two models' evaluations; the curves their logs.
    clean = []
    for seed in (0, 1):
        folder = comparison.run_dir(str(output_dir), "cnn", seed)
        with open(os.path.join(folder, "robustness.json")) as file:
            clean.append(json.load(file)["clean"]["accuracy"])
        with open(os.path.join(folder, "history.csv")) as file:
            last = file.read().splitlines()[-1].split(",")
        curve = results["learning_curves"]["cnn"]["seeds"][str(seed)]
        assert curve["steps"] == [2]
        assert np.isclose(curve["accuracy"][0], float(last[
            _column(folder, "val_accuracy")]))
    assert np.isclose(results["routers"]["cnn"]["accuracy"]["clean"]["mean"],
                      np.mean(clean))
    # All finished: the same command without --shard trains nothing.
    model_path = os.path.join(
        comparison.run_dir(str(output_dir), "cnn", 1), "model.keras")
    modified = os.path.getmtime(model_path)
    again = run_comparison(
        ["cnn"], "mnist", output_dir=str(output_dir), seeds=[0, 1],
        epochs=1, steps_per_epoch=2, batch_size=8, reconstruction=False,
        data_dir=data_dir, corruptions={"noise": [0.3]},
        isolation="session")
    assert not any(run["trained_now"] for run in again["models"])
    assert os.path.getmtime(model_path) == modified
    assert json.loads(json.dumps(again["routers"])) == results["routers"]


def _column(folder, name):
    with open(os.path.join(folder, "history.csv")) as file:
        return file.readline().strip().split(",").index(name)


def test_a_comparison_target_is_checked_recorded_and_handed_on(tmp_path):
    output_dir = str(tmp_path / "unused")
    for kwargs, message in (
            (dict(until_accuracy=1.5), "until_accuracy=1.5"),
            (dict(until_accuracy=0.9, validation="test"),
             "validation='test'"),
            (dict(shard="2/1"), "shard=2/1"),
            (dict(workers=2, isolation="session"), "isolation='session'")):
        with pytest.raises(ValueError, match=message):
            run_comparison(["cnn"], "mnist", output_dir=output_dir,
                               **kwargs)
    assert not os.path.exists(output_dir)
    settings = comparison_settings.check_settings(
        ["dynamic", "cnn"], "mnist", [0], 3, 2, 8, "holdout", True, None,
        1234, until_accuracy=0.9)
    assert settings["until_accuracy"] == 0.9
    assert ComparisonSettings.from_record(settings).training_settings(
        "cnn", 0).until_accuracy == 0.9
    # Without a target, compare.json is as before (no key): older
    # comparisons resume.
    settings = comparison_settings.check_settings(
        ["cnn"], "mnist", [0], 3, 2, 8, "holdout", True, None, 1234)
    assert "until_accuracy" not in settings
    assert ComparisonSettings.from_record(settings).training_settings(
        "cnn", 0).until_accuracy is None
