"""Datasets a user brings through `keras-caps train`, `evaluate`, `export`
and `predict` (in-process): an image folder, an `.npz` file and a TFDS
dataset under `tfds.testing.mock_data`, and the refusals of bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_caps import cli
from keras_caps.datasets.user_data.user_dataset import resolve_user_dataset
from keras_caps.runs import is_keras_caps_export
from keras_caps.testing.image_folders import write_image_folder
from keras_caps.training import TrainingSettings
from keras_caps.training.preset_choice import closest_preset

CLASSES = {"cat": 9, "dog": 7, "owl": 6}  # Uneven, PNG and JPEG, L and RGB.
TINY = ["--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "4"]


def _run(capsys, *argv):
    status = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _json(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    """One run trained on a 16x16 image folder through the command line."""
    root = tmp_path_factory.mktemp("user_data")
    paths = write_image_folder(root / "pets", CLASSES, size=(16, 16))
    run = root / "run"
    status = cli.main(["train", "--dataset", f"folder:{root / 'pets'}",
                       "--no-reconstruction", "--output-dir", str(run),
                       *TINY])
    assert status == 0
    return {"root": root, "images": root / "pets", "run": run,
            "paths": paths}


def test_train_records_the_data_preset_and_class_names(folder_run):
    run = folder_run["run"]
    names = sorted(CLASSES)
    assert _json(run / "class_names.json") == names
    assert _json(run / "checkpoints" / "class_names.json") == names
    assert is_keras_caps_export(run / "export")
    assert _json(run / "export" / "assets.extra" / "class_names.json") == (
        names)
    settings = _json(run / "run.json")["settings"]
    metrics = _json(run / "metrics.json")
    for record in (settings, metrics):
        # 16x16 RGB (the folder mixes L and RGB files): no RGB preset, and
        # of the others MNIST's image area is the nearest.
        assert record["preset"] == "mnist"
        assert record["dataset_options"] == {"augment": False}
        source = record["data_source"]
        assert source["class_names"] == names
        assert source["image_size"] == [16, 16]
        assert source["path"] == str(folder_run["images"])
        assert source["fingerprint"]["files"] == sum(CLASSES.values())
    # The 20 % test share: round(0.2 * count) images of each class.
    assert metrics["data_source"]["num_test"] == 2 + 1 + 1
    assert TrainingSettings.from_record(settings).to_record() == settings


def test_evaluate_uses_the_runs_test_images(folder_run, capsys):
    run, images = folder_run["run"], folder_run["images"]
    status, out, err = _run(capsys, "evaluate", "--model-path",
                            run / "model.keras", "--dataset",
                            f"folder:{images}")
    assert status == 0, err
    record = json.loads(out)
    metrics = _json(run / "metrics.json")
    assert record["data_source"]["test"] == metrics["data_source"]["test"]
    np.testing.assert_allclose(record["test"]["accuracy"],
                               metrics["test"]["accuracy"], rtol=1e-6)
    status, _, err = _run(capsys, "evaluate", "--model-path",
                          run / "model.keras", "--dataset",
                          f"folder:{images}", "--image-size", "20")
    assert status == 2
    assert "takes 16x16x3 images" in err and "--image-size 16,16" in err


def test_predict_prints_the_class_names_from_model_and_export(folder_run,
                                                              capsys):
    run = folder_run["run"]
    files = [folder_run["paths"]["dog"][0], folder_run["paths"]["owl"][1]]
    scores = {}
    for model in (run / "model.keras", run / "export"):
        status, out, err = _run(capsys, "predict", model, *files, "--json")
        assert status == 0, err
        records = json.loads(out)
        for record in records:
            order = np.argsort(-np.array(record["scores"]))
            assert [entry["class"] for entry in record["top_k"]] == [
                sorted(CLASSES)[index] for index in order]
        scores[model.name] = [record["scores"] for record in records]
    np.testing.assert_allclose(scores["model.keras"], scores["export"],
                               rtol=1e-4, atol=1e-5)


def test_a_changed_folder_is_refused_on_resume(folder_run, capsys):
    run, images = folder_run["run"], folder_run["images"]
    before = (run / "run.json").read_bytes()
    extra = images / "cat" / "extra.png"
    extra.write_bytes((images / "cat" / "0.png").read_bytes())
    try:
        status, _, err = _run(capsys, "train", "--dataset",
                              f"folder:{images}", "--no-reconstruction",
                              "--output-dir", run, *TINY)
    finally:
        extra.unlink()
    assert status == 2
    assert "is not what the run in" in err and "fingerprint" in err
    assert f"then {sum(CLASSES.values())} files" in err and "--fresh" in err
    assert (run / "run.json").read_bytes() == before
    # The same folder again: the complete run is recognised.
    status, _, err = _run(capsys, "train", "--dataset", f"folder:{images}",
                          "--no-reconstruction", "--output-dir", run, *TINY)
    assert status == 0, err


def test_npz_arrays_train_the_cnn_baseline(tmp_path, capsys):
    rng = np.random.default_rng(0)
    labels = np.arange(24) % 3
    images = (rng.integers(0, 60, (24, 16, 16, 1))
              + 60 * labels[:, None, None, None]).astype(np.uint8)
    np.savez(tmp_path / "arrays.npz", x_train=images[:18],
             y_train=labels[:18], x_test=images[18:], y_test=labels[18:])
    status, out, err = _run(capsys, "train", "--model", "cnn",
                            "--dataset", f"npz:{tmp_path / 'arrays.npz'}",
                            "--no-reconstruction", "--augment",
                            "--output-dir", tmp_path / "run", *TINY)
    assert status == 0, err
    metrics = _json(tmp_path / "run" / "metrics.json")
    assert metrics["dataset_options"] == {"augment": True}
    assert metrics["data_source"]["num_test"] == 6
    assert _json(tmp_path / "run" / "class_names.json") == ["0", "1", "2"]


def test_a_tfds_dataset_under_mock_data(tmp_path, capsys):
    with tfds.testing.mock_data(num_examples=12):
        status, _, err = _run(
            capsys, "train", "--model", "cnn", "--dataset",
            "tfds:svhn_cropped", "--no-reconstruction", "--output-dir",
            tmp_path / "run", *TINY)
    assert status == 0, err
    metrics = _json(tmp_path / "run" / "metrics.json")
    assert metrics["data_source"]["name"] == "svhn_cropped"
    assert metrics["data_source"]["image_size"] == [32, 32]
    assert metrics["preset"] == "mnist"  # No RGB preset: the nearest area.
    assert _json(tmp_path / "run" / "class_names.json") == [
        str(digit) for digit in range(10)]


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "mnist", "--image-size", "28"],
     "do not apply to 'mnist'"),
    (["--dataset", "mnist", "--preset", "mnist"], "Only datasets a user"),
    (["--dataset", "mnist", "--augment"], "--augment and --no-augment"),
    (["--dataset", "FOLDER", "--image-size", "8"],
     "need images of at least 11x11"),
    (["--dataset", "FOLDER", "--model", "inverted_attention_capsnet",
      "--preset", "mnist"], "Expected `preset` (--preset) to be one of"),
    (["--dataset", "FOLDER", "--test-share", "1.5"], "test_share"),
])
def test_bad_input_is_refused_before_anything_is_written(
        argv, message, tmp_path, capsys):
    write_image_folder(tmp_path / "images", {"a": 8, "b": 8}, size=(16, 16))
    argv = [f"folder:{tmp_path / 'images'}" if arg == "FOLDER" else arg
            for arg in argv]
    output_dir = tmp_path / "run"
    status, _, err = _run(capsys, "train", *argv, "--output-dir",
                          output_dir, *TINY)
    assert status == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1, err
    # Nothing written: at most the empty folder the run lock made.
    assert not os.path.exists(output_dir) or not os.listdir(output_dir)


@pytest.mark.single_backend
def test_the_closest_preset():
    assert closest_preset("efficient_capsnet", (16, 16, 1)) == "mnist"
    # MultiMNIST's preset (36 x 36) reads two digits an image: never
    # chosen for a user's single-label images.
    assert closest_preset("efficient_capsnet", (38, 38, 1)) == "mnist"
    assert closest_preset("dynamic", (36, 36, 1)) == (
        "mnist_canvas")
    assert closest_preset("efficient_capsnet", (48, 48, 2)) == "smallnorb"
    assert closest_preset("dynamic", (40, 40, 1)) == (
        "mnist_canvas")
    assert closest_preset("inverted_attention_capsnet", (64, 64, 3)) == (
        "cifar10")
    # No RGB preset: the nearest area among all.
    assert closest_preset("efficient_capsnet", (32, 32, 3)) == "mnist"


@pytest.mark.single_backend
def test_settings_read_the_data_again_and_refuse_changes(tmp_path):
    from keras_caps.training.user_data import read_user_data

    write_image_folder(tmp_path / "images", {"a": 5, "b": 5}, size=(16, 16))
    spec = f"folder:{tmp_path / 'images'}"
    settings = TrainingSettings("efficient_capsnet", spec)
    data, settings = read_user_data(settings, {"test_share": 0.4})
    assert settings.data_source == json.loads(json.dumps(
        resolve_user_dataset(spec, test_share=0.4).source_record()))
    again, same = read_user_data(settings, None)
    assert same == settings
    np.testing.assert_array_equal(again.arrays.test[0], data.arrays.test[0])
    with pytest.raises(ValueError, match="cannot change it"):
        read_user_data(settings, {"image_size": 20})
    write_image_folder(tmp_path / "images", {"c": 5}, size=(16, 16))
    with pytest.raises(ValueError, match="changed since"):
        read_user_data(settings, None)


def test_compare_on_an_image_folder(folder_run, tmp_path, capsys):
    images = folder_run["images"]
    argv = ["compare", "--dataset", f"folder:{images}", "--routers", "cnn",
            "--seeds", "0", "--no-reconstruction", "--output-dir",
            tmp_path / "compare", *TINY]
    status, out, err = _run(capsys, *argv)
    assert status == 0, err
    results = _json(tmp_path / "compare" / "results.json")
    settings = results["settings"]
    assert settings["preset"] == "mnist"
    assert settings["data"]["source"] == _json(
        folder_run["run"] / "metrics.json")["data_source"]
    model = results["models"][0]
    assert model["evaluation"]["clean"]["num_images"] == 4
    # The costs of a model without a decoder: none of them the decoder's.
    evaluation = model["evaluation"]
    assert evaluation["multiply_adds"] > 0
    assert (evaluation["decoder_multiply_adds"],
            evaluation["decoder_parameters"]) == (0, 0)
    assert (evaluation["trainable_parameters_with_decoder"]
            == evaluation["trainable_parameters"])
    trained = _json(tmp_path / "compare" / "models" / "cnn_seed0"
                    / "metrics.json")
    assert trained["data_source"] == settings["data"]["source"]
    assert "clean" in out and "4 test images" in out
    status, _, err = _run(capsys, *argv[:-len(TINY)], *TINY[:2])
    assert status == 2 and "holds a comparison" in err
    status, _, err = _run(capsys, *argv, "--noise", "0.1")
    assert status == 2 and "clean accuracy only" in err


def test_evaluate_never_tests_on_images_it_cannot_tell_apart(
        folder_run, tmp_path, capsys):
    run, images = folder_run["run"], folder_run["images"]
    metrics = _json(run / "metrics.json")
    # A model copied without its run record: which images it trained on
    # is unknown, so a fresh test share of the folder is refused ...
    copy = tmp_path / "copied"
    copy.mkdir()
    (copy / "model.keras").write_bytes((run / "model.keras").read_bytes())
    status, out, err = _run(capsys, "evaluate", "--model-path",
                            copy / "model.keras", "--dataset",
                            f"folder:{images}")
    assert status == 2 and out == ""
    assert "No record of the run" in err and "--test-share" in err
    # ... unless the user names the split: the run's gives its accuracy.
    status, out, err = _run(capsys, "evaluate", "--model-path",
                            copy / "model.keras", "--dataset",
                            f"folder:{images}", "--test-share", "0.2")
    assert status == 0, err
    np.testing.assert_allclose(json.loads(out)["test"]["accuracy"],
                               metrics["test"]["accuracy"], rtol=1e-6)


def test_read_options_keep_the_runs_test_split(tmp_path, capsys):
    write_image_folder(tmp_path / "pets", CLASSES, size=(16, 16))
    run = tmp_path / "run"
    assert _run(capsys, "train", "--dataset", f"folder:{tmp_path / 'pets'}",
                "--no-reconstruction", "--output-dir", run,
                "--test-share", "0.5", *TINY)[0] == 0
    # A read option given (the same colour mode) used to draw the default
    # share, 0.2, whose images the run had trained on.
    status, out, err = _run(capsys, "evaluate", "--model-path",
                            run / "model.keras", "--dataset",
                            f"folder:{tmp_path / 'pets'}", "--color-mode",
                            "rgb")
    assert status == 0, err
    assert json.loads(out)["data_source"]["test"]["share"] == 0.5


def test_a_test_folder_of_training_images_is_refused(folder_run, tmp_path,
                                                      capsys):
    images = folder_run["images"]
    output_dir = tmp_path / "same"
    status, _, err = _run(capsys, "train", "--dataset", f"folder:{images}",
                          "--test-dir", images, "--output-dir", output_dir,
                          *TINY)
    assert status == 2
    assert "are also training images" in err
    assert not output_dir.exists() or os.listdir(output_dir) == []
