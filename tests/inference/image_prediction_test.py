"""`predict_images` against the model run on pixels read with Pillow."""

import os

import keras
import numpy as np
import pytest
from PIL import Image

from keras_caps.applications import EfficientCapsNet
from keras_caps.inference import find_image_paths
from keras_caps.inference import inference_model
from keras_caps.inference import predict_images
from keras_caps.inference import write_class_names
from keras_caps.inference.image_files import UnreadableImageError
from keras_caps.testing.image_folders import write_image_folder
from keras_caps.testing.image_folders import write_truncated_image
from tests.visualization.tiny_models import tiny_capsnet


@pytest.fixture(scope="module")
def gray_model():
    keras.utils.set_random_seed(0)
    return EfficientCapsNet("mnist", input_shape=(16, 16, 1), num_classes=3)


@pytest.fixture(scope="module")
def rgb_model():
    keras.utils.set_random_seed(0)
    return EfficientCapsNet("mnist", input_shape=(12, 12, 3), num_classes=2,
                            reconstruction=False)


@pytest.fixture
def folder(tmp_path):
    write_image_folder(tmp_path / "images", {"a": 2, "b": 1, "c": 2},
                       size=(16, 16), formats=("png",), colors=("L", "RGB"))
    return tmp_path / "images"


def _pil_pixels(paths, mode="L"):
    """Reference inputs: the files decoded by Pillow directly."""
    arrays = []
    for path in paths:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert(mode), dtype="float32")
        arrays.append(pixels.reshape(16, 16, -1))
    return np.stack(arrays)


def test_scores_are_the_model_scores_of_each_file(gray_model, folder):
    records = predict_images(gray_model, [str(folder)], top_k=2,
                             class_names=["x", "y", "z"], batch_size=2)
    paths = [record["path"] for record in records]
    assert paths == sorted(str(p) for p in folder.rglob("*.png"))
    expected = inference_model(gray_model).predict(_pil_pixels(paths),
                                                   verbose=0)
    got = np.array([record["scores"] for record in records])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for record, scores in zip(records, expected):
        order = np.argsort(-scores)[:2]
        assert [name for name, _ in record["top_k"]] == [
            "xyz"[index] for index in order]
        assert record["top_k"][0][1] == pytest.approx(scores.max(), 1e-5)


def test_rgb_model_gets_three_channels_and_resized_images(rgb_model,
                                                         tmp_path):
    model = rgb_model
    paths = write_image_folder(tmp_path, {"a": 2}, size=(16, 16),
                               formats=("png",), colors=("L",))["a"]
    records = predict_images(model, paths, top_k=5)
    resized = []
    for path in paths:
        with Image.open(path) as image:
            resized.append(np.asarray(image.convert("RGB").resize(
                (12, 12), Image.Resampling.BILINEAR), "float32"))
    expected = model.predict(np.stack(resized), verbose=0)
    np.testing.assert_allclose([r["scores"] for r in records], expected,
                               rtol=1e-5, atol=1e-6)
    assert [name for name, _ in records[0]["top_k"]] in (["0", "1"],
                                                         ["1", "0"])


def test_reconstructions_match_the_inference_model(gray_model, folder):
    records = predict_images(gray_model, folder / "a", reconstruction=True)
    images = _pil_pixels([record["path"] for record in records])
    outputs = inference_model(gray_model, reconstruction=True).predict(
        images, verbose=0)
    for record, image, reconstructed in zip(records, images,
                                            outputs["reconstruction"]):
        np.testing.assert_array_equal(record["image"], image)
        assert record["image"].dtype == np.uint8
        np.testing.assert_allclose(record["reconstruction"], reconstructed,
                                   atol=1e-6)


def test_a_model_without_decoder_has_no_reconstruction(rgb_model, folder):
    with pytest.raises(ValueError, match="decoder"):
        predict_images(rgb_model, folder, reconstruction=True)


def test_without_resizing_a_size_mismatch_names_the_file(gray_model,
                                                         tmp_path):
    path = tmp_path / "big.png"
    Image.fromarray(np.zeros((20, 18), "uint8")).save(path)
    with pytest.raises(ValueError, match=r"big.png.*20x18.*16x16"):
        predict_images(gray_model, [path], resize=False)
    assert len(predict_images(gray_model, [path])) == 1


def test_class_names_kept_beside_a_model_path(gray_model, folder, tmp_path):
    gray_model.save(tmp_path / "model.keras")
    write_class_names(tmp_path / "class_names.json", ["x", "y", "z"])
    records = predict_images(str(tmp_path / "model.keras"), folder)
    assert {name for record in records
            for name, _ in record["top_k"]} == {"x", "y", "z"}
    with pytest.raises(ValueError, match="names a class twice"):
        write_class_names(tmp_path / "names.json", ["x", "x"])


def test_paths_files_folders_and_globs(folder):
    a0, a1 = str(folder / "a" / "0.png"), str(folder / "a" / "1.png")
    assert find_image_paths([a1, str(folder / "a" / "*.png")]) == [a1, a0]
    assert find_image_paths(str(folder / "**" / "0.png")) == [
        str(folder / name / "0.png") for name in "abc"]
    (folder / "notes.txt").write_text("not an image")
    assert len(find_image_paths(folder)) == 5
    with pytest.raises(ValueError, match=r"No image files matched.*\*\.jpg"):
        find_image_paths([str(folder / "*.jpg")])
    with pytest.raises(FileNotFoundError, match="nowhere.png"):
        find_image_paths(str(folder / "nowhere.png"))
    os.makedirs(folder / "empty")
    with pytest.raises(ValueError, match="No image files matched"):
        find_image_paths(folder / "empty")


def test_bad_arguments(gray_model, folder):
    with pytest.raises(ValueError, match="3 classes; received 2"):
        predict_images(gray_model, folder, class_names=["x", "y"])
    with pytest.raises(ValueError, match="top_k"):
        predict_images(gray_model, folder, top_k=0)
    broken = write_truncated_image(folder / "a" / "9.png")
    with pytest.raises(UnreadableImageError, match="9.png"):
        predict_images(gray_model, folder)
    with pytest.raises(ValueError, match="not a model built by keras_caps"):
        predict_images(keras.Sequential([keras.Input((16, 16, 1)),
                                         keras.layers.Flatten()]), broken)


def test_a_model_of_two_channels_is_refused(folder):
    model = tiny_capsnet(input_shape=(12, 12, 2))
    with pytest.raises(ValueError, match="takes 2 channels"):
        predict_images(model, folder)
