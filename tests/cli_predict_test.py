"""`keras-caps predict` in-process: tables, JSON, class names, exports."""

import json
import shutil

import keras
import numpy as np
import pytest
from PIL import Image

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.inference import inference_model
from keras_caps.runs.output_files import read_mark
from keras_caps.testing.image_folders import write_image_folder
from keras_caps.testing.image_folders import write_truncated_image


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny model with a decoder, its .keras file and 5 PNG files."""
    root = tmp_path_factory.mktemp("predict")
    keras.utils.set_random_seed(1)
    model = EfficientCapsNet("mnist", input_shape=(16, 16, 1), num_classes=3)
    (root / "run").mkdir()
    model.save(root / "run" / "model.keras")
    paths = write_image_folder(root / "images", {"a": 2, "b": 1, "c": 2},
                               formats=("png",), colors=("L", "RGB"))
    files = sorted(path for name in paths for path in paths[name])
    pixels = []
    for path in files:
        with Image.open(path) as image:
            pixels.append(np.asarray(image.convert("L"), "float32"))
    expected = inference_model(model).predict(
        np.stack(pixels)[..., None], verbose=0)
    return {"model": model, "path": str(root / "run" / "model.keras"),
            "images": str(root / "images"), "files": files,
            "pixels": np.stack(pixels), "scores": expected}


def _predict(capsys, *argv):
    status = cli.main(["predict", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def _error(capsys, *argv):
    status, _, err = _predict(capsys, *argv)
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_table_lists_the_top_classes_of_each_image(saved, capsys):
    status, out, _ = _predict(capsys, saved["path"], saved["images"],
                              "--top-k", "2")
    assert status == 0
    lines = out.strip().splitlines()
    assert lines[0].split() == ["image", "top", "1", "top", "2"]
    assert [line.split()[0] for line in lines[1:]] == saved["files"]
    for line, scores in zip(lines[1:], saved["scores"]):
        best = np.argsort(-scores)[:2]
        assert line.split()[1:] == [f"{index}" if k % 2 == 0 else
                                    f"({scores[index]:.3f})"
                                    for index in best for k in (0, 1)]


def test_json_scores_and_class_names_beside_the_model(saved, capsys,
                                                      tmp_path):
    names_file = tmp_path / "names.txt"
    names_file.write_text("ant\nbee\ncow\n")
    status, out, _ = _predict(capsys, saved["path"], saved["images"],
                              "--json", "--class-names", names_file)
    assert status == 0
    records = json.loads(out)
    np.testing.assert_allclose([r["scores"] for r in records],
                               saved["scores"], rtol=1e-5, atol=1e-6)
    assert {r["top_k"][0]["class"] for r in records} <= {"ant", "bee", "cow"}
    assert [entry["class"] for entry in records[0]["top_k"]] == [
        ["ant", "bee", "cow"][index]
        for index in np.argsort(-saved["scores"][0])]
    beside = tmp_path / "run"
    beside.mkdir()
    shutil.copy(saved["path"], beside / "model.keras")
    (beside / "class_names.json").write_text('["x", "y", "z"]')
    status, out, _ = _predict(capsys, beside / "model.keras",
                              saved["files"][0], "--json", "--top-k", "1")
    best = int(np.argmax(saved["scores"][0]))
    assert json.loads(out)[0]["top_k"][0]["class"] == "xyz"[best]


def test_reconstruction_png(saved, capsys, tmp_path):
    output = tmp_path / "rec.png"
    status, out, _ = _predict(capsys, saved["path"], saved["images"],
                              "--reconstruction", output)
    assert status == 0 and f"Wrote {output}" in out
    assert read_mark(str(output)) == "keras-caps predict"
    with Image.open(output) as image:
        grid = np.asarray(image)
    assert grid.shape == (5 * 18 - 2, 34)
    np.testing.assert_array_equal(grid[18:34, :16], saved["pixels"][1])
    # Its own file is replaced; a user's file never.
    assert _predict(capsys, saved["path"], saved["files"][0],
                    "--reconstruction", output)[0] == 0
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"user data")
    err = _error(capsys, saved["path"], saved["images"],
                 "--reconstruction", mine)
    assert "was not written by" in err and mine.read_bytes() == b"user data"


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the SavedModel export needs TensorFlow")
def test_saved_model_export_gives_the_same_scores(saved, capsys, tmp_path):
    from keras_caps.export import export_inference_model

    export = tmp_path / "export"
    export_inference_model(saved["model"], str(export), reconstruction=True,
                           input_range="unit")
    status, out, _ = _predict(capsys, export, saved["images"], "--json",
                              "--reconstruction", tmp_path / "rec.png")
    assert status == 0
    records = json.loads(out)  # "Wrote rec.png" goes to stderr.
    np.testing.assert_allclose([r["scores"] for r in records],
                               saved["scores"], rtol=1e-4, atol=1e-5)
    assert (tmp_path / "rec.png").exists()


def test_bad_inputs_exit_2_with_one_line(saved, capsys, tmp_path):
    assert "No model at `MODEL`" in _error(
        capsys, tmp_path / "none.keras", saved["images"])
    assert "not a keras_caps SavedModel export" in _error(
        capsys, tmp_path, saved["images"])
    assert "holds 'model.keras': pass that file" in _error(
        capsys, saved["path"].rsplit("/", 1)[0], saved["images"])
    assert "nowhere.png" in _error(capsys, saved["path"],
                                   tmp_path / "nowhere.png")
    assert "No image files matched" in _error(capsys, saved["path"],
                                              str(tmp_path / "*.png"))
    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((20, 20), "uint8")).save(big)
    assert "big.png' is 20x20" in _error(capsys, saved["path"], big,
                                        "--no-resize")
    broken = write_truncated_image(tmp_path / "cut.png")
    assert "cut.png" in _error(capsys, saved["path"], broken)
    names = tmp_path / "names.json"
    names.write_text('["only", "two"]')
    assert "3 classes; received 2" in _error(
        capsys, saved["path"], big, "--class-names", names)
    plain = tmp_path / "plain.keras"
    EfficientCapsNet("mnist", input_shape=(16, 16, 1), num_classes=3,
                     reconstruction=False).save(plain)
    assert "decoder" in _error(capsys, plain, big, "--reconstruction",
                               tmp_path / "r.png")
    assert not (tmp_path / "r.png").exists()


def _foreign_saved_model(folder, written):
    """A SavedModel not written by keras_caps, serving `length` like an
    export, whose signature writes the file `written` when it runs."""
    import tensorflow as tf

    class Foreign(tf.Module):
        @tf.function(input_signature=[
            tf.TensorSpec((None, 16, 16, 1), "float32", name="image")])
        def serve(self, image):
            with tf.control_dependencies(
                    [tf.io.write_file(str(written), "ran")]):
                return {"length": tf.zeros((tf.shape(image)[0], 3))}

    module = Foreign()
    tf.saved_model.save(module, str(folder),
                        signatures={"serve": module.serve})


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the SavedModel export needs TensorFlow")
def test_a_foreign_saved_model_with_a_hand_written_marker_is_refused(
        saved, capsys, tmp_path):
    """#41, item 8: predict ran any SavedModel given a marker file."""
    folder = tmp_path / "foreign"
    written = tmp_path / "written_by_the_graph.txt"
    _foreign_saved_model(folder, written)
    (folder / "keras_caps_export.json").write_text(
        json.dumps({"format": "saved_model", "input_range": "pixels"}))
    error = _error(capsys, folder, saved["images"])
    assert "is not an unchanged export of keras_caps" in error
    assert "load only exports you trust" in error
    assert not written.exists()


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the SavedModel export needs TensorFlow")
def test_an_export_with_an_added_file_is_refused(saved, capsys, tmp_path):
    from keras_caps.export import export_inference_model

    export = tmp_path / "export"
    export_inference_model(saved["model"], str(export))
    (export / "variables" / "extra.txt").write_text("not keras_caps'")
    assert "is not an unchanged export of keras_caps" in _error(
        capsys, export, saved["images"])
