import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


@pytest.fixture
def saved_model_and_data(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40), synthetic_digits(24))
    model_path = str(tmp_path / "model.keras")
    EfficientCapsNet("mnist").save(model_path)
    return model_path, data_dir


def test_evaluate_writes_metrics(saved_model_and_data, tmp_path, capsys):
    model_path, data_dir = saved_model_and_data
    output = str(tmp_path / "metrics.json")
    code = cli.main(["evaluate", "--model-path", model_path, "--dataset",
                     "mnist", "--data-dir", data_dir, "--batch-size", "8",
                     "--output", output])
    assert code == 0
    with open(output) as file:
        record = json.load(file)
    assert record["dataset"] == "mnist"
    assert 0.0 <= record["test"]["length_accuracy"] <= 1.0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{"):]) == record


def test_evaluate_writes_a_class_report(saved_model_and_data, tmp_path,
                                       capsys):
    model_path, data_dir = saved_model_and_data
    folder = tmp_path / "report"
    arguments = ["evaluate", "--model-path", model_path, "--dataset",
                 "mnist", "--data-dir", data_dir, "--batch-size", "8",
                 "--class-report", str(folder)]
    assert cli.main(arguments) == 0
    printed = capsys.readouterr().out
    record = json.loads(printed[printed.index("{"):])
    assert sorted(os.listdir(folder)) == ["class_report.json",
                                          "confusion_matrix.png"]
    with open(folder / "class_report.json") as file:
        report = json.load(file)
    matrix = np.array(report["confusion_matrix"])
    # Every test image, once; the diagonal is the accuracy Keras reports.
    assert matrix.shape == (10, 10) and matrix.sum() == 24
    assert report["accuracy"] == pytest.approx(
        record["test"]["length_accuracy"])
    assert [entry["class"] for entry in report["classes"]] == [
        str(index) for index in range(10)]
    assert record["class_report"]["macro"] == report["macro"]
    # A second report into the same folder is refused: nothing replaced.
    written = (folder / "class_report.json").read_bytes()
    assert cli.main(arguments) == 2
    assert "never replaced" in capsys.readouterr().err
    assert (folder / "class_report.json").read_bytes() == written


def test_a_class_report_of_a_model_without_capsule_lengths(tmp_path):
    # The CNN's scores are probabilities, not capsule lengths: the report
    # reads its serving graph's class scores all the same.
    from keras_caps.applications import CNNBaseline
    from keras_caps.training import evaluate

    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40), synthetic_digits(24))
    model_path = str(tmp_path / "cnn.keras")
    CNNBaseline("mnist").save(model_path)
    record = evaluate(model_path, "mnist", data_dir=data_dir, batch_size=8,
                      class_report=True)
    report = record["class_report"]
    assert np.array(report["confusion_matrix"]).sum() == 24
    assert report["accuracy"] == pytest.approx(record["test"]["accuracy"])


@pytest.mark.parametrize("flags, message", [
    (["--dataset", "multi_mnist"], "one class per image"),
    (["--class-report-file"], "is a file"),
])
def test_evaluate_refuses_a_class_report_it_cannot_write(
        saved_model_and_data, tmp_path, capsys, flags, message):
    model_path, data_dir = saved_model_and_data
    folder = tmp_path / "report"
    if flags == ["--class-report-file"]:
        folder.write_text("notes")
        flags = []
    assert cli.main(["evaluate", "--model-path", model_path, "--data-dir",
                     data_dir, "--class-report", str(folder),
                     *flags]) == 2
    assert message in capsys.readouterr().err
    assert not folder.is_dir()


def test_export_serves_raw_images(saved_model_and_data, tmp_path):
    model_path, _ = saved_model_and_data
    export_dir = str(tmp_path / "exported")
    assert cli.main(["export", "--model-path", model_path, "--export-dir",
                     export_dir, "--reconstruction"]) == 0
    served = tf.saved_model.load(export_dir)
    outputs = served.serve(tf.constant(
        np.zeros((3, 28, 28, 1), dtype="float32")))
    assert tuple(outputs["length"].shape) == (3, 10)
    assert tuple(outputs["reconstruction"].shape) == (3, 28, 28, 1)


def test_export_in_mixed_bfloat16_matches_float32(saved_model_and_data,
                                                  tmp_path):
    model_path, _ = saved_model_and_data
    images = tf.constant(np.random.default_rng(0).uniform(
        0, 255, (5, 28, 28, 1)).astype("float32"))
    scores = {}
    for precision in ("float32", "mixed_bfloat16"):
        export_dir = str(tmp_path / precision)
        assert cli.main(["export", "--model-path", model_path, "--export-dir",
                         export_dir, "--precision", precision]) == 0
        served = tf.saved_model.load(export_dir)
        scores[precision] = served.serve(images)["length"].numpy()
    assert scores["mixed_bfloat16"].dtype == np.float32
    np.testing.assert_allclose(scores["mixed_bfloat16"], scores["float32"],
                               atol=0.02)
    assert not np.array_equal(scores["mixed_bfloat16"], scores["float32"])


@pytest.fixture
def saved_model(tmp_path):
    model_path = tmp_path / "model.keras"
    EfficientCapsNet("mnist", reconstruction=False).save(model_path)
    return model_path


def test_export_keeps_a_folder_with_other_files(saved_model, tmp_path):
    """`keras-caps export` refuses, in a fresh process, to replace files."""
    (tmp_path / "notes.txt").write_text("keep me")
    target = tmp_path / "out"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    worktree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=worktree)
    for export_dir, flags in (("out", []), (".", []),
                              ("out", ["--overwrite"])):
        result = subprocess.run(
            [sys.executable, "-m", "keras_caps.cli", "export",
             "--model-path", "model.keras", "--export-dir", export_dir,
             *flags], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=300)
        assert result.returncode == 2, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        (line,) = [line for line in result.stderr.splitlines()
                   if line.startswith("keras-caps export: error:")]
        assert "Refusing to export" in line, line
        assert sorted(os.listdir(tmp_path)) == ["model.keras", "notes.txt",
                                                "out"]
        assert (tmp_path / "notes.txt").read_text() == "keep me"
        assert os.listdir(target) == ["mine.txt"]


def test_export_refuses_a_file_and_the_models_folder(saved_model, tmp_path,
                                                     monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    before = sorted(os.listdir(tmp_path))
    monkeypatch.chdir(tmp_path / "..")
    for export_dir, message in (
            (str(tmp_path / "notes.txt"), "is not a folder"),
            (str(tmp_path), "holds the model file"),
            (str(tmp_path / ".."), "holds the model file")):
        assert cli.main(["export", "--model-path", str(saved_model),
                         "--export-dir", export_dir]) == 2
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1, error
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_export_overwrites_its_own_export_only_with_the_flag(
        saved_model, tmp_path, capsys):
    export_dir = str(tmp_path / "exported")
    argv = ["export", "--model-path", str(saved_model), "--export-dir",
            export_dir]
    assert cli.main(argv) == 0
    written = os.stat(os.path.join(export_dir, "saved_model.pb")).st_mtime_ns
    capsys.readouterr()
    assert cli.main(argv) == 2
    assert "`--overwrite`" in capsys.readouterr().err
    assert os.stat(os.path.join(export_dir,
                                "saved_model.pb")).st_mtime_ns == written
    marker = os.path.join(export_dir, "keras_caps_export.json")
    with open(marker) as file:
        assert json.load(file)["model_path"] == str(saved_model)
    assert cli.main(argv + ["--overwrite"]) == 0
    served = tf.saved_model.load(export_dir)
    scores = served.serve(tf.zeros((2, 28, 28, 1)))
    assert {name: tuple(value.shape) for name, value in scores.items()} == {
        "length": (2, 10)}
    assert sorted(os.listdir(tmp_path)) == ["exported", "model.keras"]


@pytest.mark.parametrize("argv, message", [
    (["export", "--model-path", "missing.keras", "--export-dir", "x"],
     "No model at `--model-path`"),
    (["evaluate", "--model-path", "missing.keras"],
     "No model at `model_path`"),
])
def test_clear_errors(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_arguments_are_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--dataset", "cifar"])
    assert "invalid choice: 'cifar'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "--epochs", "0"])
    assert "expected a positive integer" in capsys.readouterr().err


def test_temperature_flags_reach_train(tmp_path, monkeypatch, capsys):
    from keras_caps import training

    received = {}

    def fake_train(*args, **kwargs):
        received.update(kwargs)
        return {}

    monkeypatch.setattr(training, "train", fake_train)
    argv = ["train", "--output-dir", str(tmp_path / "run")]
    assert cli.main(argv) == 0
    assert (received["routing_temperature"], received["temperature_decay"],
            received["min_temperature"]) == (None, 0.0, None)
    assert cli.main(argv + ["--routing-temperature", "10",
                            "--temperature-decay", "0.01",
                            "--min-temperature", "0.5"]) == 0
    assert (received["routing_temperature"], received["temperature_decay"],
            received["min_temperature"]) == (10.0, 0.01, 0.5)


@pytest.mark.parametrize("flags, message", [
    (["--routing-temperature", "0"], "`routing_temperature`"),
    (["--routing-temperature", "nan"], "`routing_temperature`"),
    (["--temperature-decay", "-1"], "`temperature_decay`"),
    (["--routing-temperature", "2", "--min-temperature", "3"],
     "`min_temperature`, expected at most"),
])
def test_bad_temperature_flags_fail_before_training(flags, message, tmp_path,
                                                    capsys):
    argv = ["train", "--output-dir", str(tmp_path / "run"), "--data-dir",
            str(tmp_path / "no_data")]
    assert cli.main(argv + flags) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


def test_label_count_mismatch_is_a_clear_error(tmp_path):
    from keras_caps import training

    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(40), synthetic_digits(24))
    model_path = str(tmp_path / "four_classes.keras")
    EfficientCapsNet("mnist", num_classes=4).save(model_path)
    with pytest.raises(ValueError, match="10 classes but the model outputs 4"):
        training.evaluate(model_path, "mnist", data_dir=data_dir)
    assert not os.path.exists(tmp_path / "metrics.json")


def test_evaluate_reuses_the_training_runs_loader_options(tmp_path,
                                                          monkeypatch):
    from keras_caps import datasets
    from keras_caps import training

    run = tmp_path / "run"
    run.mkdir()
    model_path = str(run / "model.keras")
    EfficientCapsNet("mnist").save(model_path)
    (run / "metrics.json").write_text(json.dumps(
        {"dataset": "mnist", "dataset_options": {"augment": False,
                                                 "shift": 4}}))
    seen = {}

    def fake_load(dataset, split, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop after recording the options")

    monkeypatch.setattr(datasets, "load", fake_load)
    with pytest.raises(RuntimeError, match="stop after"):
        training.evaluate(model_path, "mnist",
                          dataset_options={"augment": True})
    assert seen["shift"] == 4
    assert seen["augment"] is True  # The caller's options win.


@pytest.fixture(scope="module")
def tiny_model_path(tmp_path_factory):
    model_path = tmp_path_factory.mktemp("tiny") / "model.keras"
    EfficientCapsNet("mnist", reconstruction=False).save(model_path)
    return str(model_path)


@pytest.mark.parametrize("command", ["train", "evaluate", "plot"])
@pytest.mark.parametrize("flags, download", [([], True),
                                             (["--no-download"], False)])
def test_no_download_flag_reaches_the_data(tiny_model_path, tmp_path,
                                           monkeypatch, capsys, command,
                                           flags, download):
    from keras_caps import datasets

    seen = []

    def fake_load(dataset, split, **kwargs):
        seen.append(kwargs["download"])
        raise ValueError("stop after recording the download flag")

    monkeypatch.setattr(datasets, "load", fake_load)
    argv = {"train": ["train", "--output-dir", str(tmp_path / "run")],
            "evaluate": ["evaluate", "--model-path", tiny_model_path],
            "plot": ["plot", "reconstructions", "--model-path",
                     tiny_model_path, "--output", str(tmp_path / "a.png")]}
    assert cli.main(argv[command] + flags) == 2
    assert "stop after recording" in capsys.readouterr().err
    assert seen == [download]


@pytest.mark.parametrize("flags, hint", [
    ([], "cannot download it from this machine"),
    (["--no-download"], "--no-download")])
def test_train_without_network_fails_within_seconds(tmp_path, monkeypatch,
                                                    capsys, flags, hint):
    # Requests go through a proxy port nobody listens on: as offline.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    start = time.monotonic()
    assert cli.main(["train", "--dataset", "smallnorb", "--data-dir",
                     str(tmp_path / "tfds"), "--output-dir",
                     str(tmp_path / "run"), *flags]) == 2
    assert time.monotonic() - start < 10.0
    error = capsys.readouterr().err
    for expected in ("keras-caps train: error:", "'smallnorb' is not "
                     "prepared", hint, "tfds build smallnorb", "--data-dir"):
        assert expected in error


@pytest.mark.parametrize("argv", [
    ["train"], ["evaluate", "--model-path", "m.keras"],
    ["export", "--model-path", "m.keras", "--export-dir", "e"],
    ["plot", "curves"], ["compare"]])
def test_every_subcommand_registers_its_handler(argv):
    args = cli.build_parser().parse_args(argv)
    assert args.command == argv[0]
    assert callable(args.handler)
    assert args.handler.__name__ == f"run_{argv[0]}"
