"""LiteRT and OpenVINO exports, each run in its own runtime (the LiteRT
interpreter, OpenVINO's CPU runtime) against the Keras model's outputs.

The serving contract is the other formats': one `image` input with a
dynamic batch, the outputs named after the model's (`length`,
`reconstruction`, ...), NaN for images holding a NaN, class names and the
input range in the export. An int8 LiteRT export stores 8-bit weights and
stays within a stated tolerance of the float model.
"""

import contextlib
import io
import json
import os
import re

import keras
import numpy as np
import pytest
from PIL import Image

from keras_caps.applications import MODELS
from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.cli import main
from keras_caps.export import export_inference_model
from keras_caps.export.calibration import INT8_OPS
from keras_caps.inference import ExportedClassifier
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.training import recipe_datasets

pytest.importorskip("openvino")
pytestmark = pytest.mark.single_backend
if keras.backend.backend() != "tensorflow":
    pytest.skip("LiteRT converts on the TensorFlow backend (the OpenVINO "
                "export on JAX and PyTorch is checked by the ONNX-like "
                "contract there)", allow_module_level=True)

_SHAPE = (16, 16, 1)
_FORMATS = ("litert", "openvino")
# The reconstruction and the capsule lengths of a float32 graph in another
# runtime: float32 rounding of a different operation order.
_FLOAT_TOLERANCE = 1e-5
# Served as another registered model (its export is that model's).
_SERVED_AS_ANOTHER = {"sabour_cnn", "cnn_vectors"}
# Matrix capsules' 6-D votes need TensorFlow's own kernels (Flex), which
# LiteRT's runtime lacks: the export is refused, naming the way out.
_NOT_IN_LITERT = {("matrix_capsnet", "litert"):
                  r"LiteRT's built-in kernels cannot run this model \(it "
                  r"needs TensorFlow ops \['FlexBatchMatMulV2'.*"
                  "--format onnx"}


def _images(shape=_SHAPE, count=7):
    """Raw-pixel images, the fourth holding a NaN."""
    images = np.random.default_rng(0).uniform(
        0, 255, (count, *shape)).astype("float32")
    images[3, 2, 2, 0] = np.nan
    return images


def _keras_outputs(model, images, reconstruction):
    """The Keras inference model's outputs by name, as the exports serve
    them (a single output is named after its layer)."""
    served = inference_model(model, reconstruction=reconstruction)
    outputs = served(images)
    if not isinstance(outputs, dict):
        outputs = {served.output_names[0]: outputs}
    return {name: keras.ops.convert_to_numpy(value)
            for name, value in outputs.items()}


def _check_served(outputs, expected, atol):
    assert sorted(outputs) == sorted(expected)
    for name, value in outputs.items():
        assert value.dtype == np.float32
        assert value.shape == expected[name].shape
        finite = [index for index in range(len(value)) if index != 3]
        np.testing.assert_allclose(value[finite], expected[name][finite],
                                   atol=atol, err_msg=name)
        assert np.isnan(value[3]).all()


@pytest.mark.parametrize("export_format", _FORMATS)
def test_export_command_serves_the_keras_outputs(tmp_path, export_format):
    keras.utils.set_random_seed(1)
    model = EfficientCapsNet("mnist", input_shape=_SHAPE)
    model_path = str(tmp_path / "model.keras")
    model.save(model_path)
    names = [f"digit {index}" for index in range(10)]
    (tmp_path / "class_names.json").write_text(json.dumps(names))
    folder = str(tmp_path / "export")
    assert main(["export", "--model-path", model_path, "--export-dir",
                 folder, "--format", export_format, "--reconstruction",
                 "--input-range", "unit"]) == 0
    files = {"litert": ["model.tflite"],
             "openvino": ["model.bin", "model.xml"]}[export_format]
    assert sorted(os.listdir(folder)) == sorted(
        ["assets.extra", "keras_caps_export.json", *files])
    with open(os.path.join(folder, "keras_caps_export.json")) as file:
        marker = json.load(file)
    assert (marker["format"], marker["input_range"], marker["outputs"]) == (
        export_format, "unit", ["length", "reconstruction"])
    classifier = ExportedClassifier(folder)
    assert (classifier.image_shape, classifier.score_name,
            classifier.num_classes, classifier.has_reconstruction) == (
        _SHAPE, "length", 10, True)
    expected = _keras_outputs(model, _images(), True)
    _check_served(classifier(_images()), expected, _FLOAT_TOLERANCE)
    for count in (0, 1):  # Batches the runtimes take or are answered for.
        assert classifier(_images()[:count])["length"].shape == (count, 10)
    # `keras-caps predict` reads the export, with its class names.
    image_path = str(tmp_path / "digit.png")
    Image.fromarray(_images()[0, ..., 0].astype("uint8")).save(image_path)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["predict", folder, image_path, "--json"]) == 0
    (prediction,) = json.loads(stdout.getvalue())
    # The PNG holds the image rounded to whole pixels.
    rounded = np.floor(_images()[:1])
    scores = _keras_outputs(model, rounded, False)["length"][0]
    np.testing.assert_allclose(prediction["scores"], scores, atol=1e-5)
    best = int(np.argmax(scores))
    assert prediction["top_k"][0]["class"] == f"digit {best}"


@pytest.mark.large
def test_every_application_exports_to_litert_and_openvino(tmp_path):
    # Each registered model at its dataset's shape, both formats, against
    # its Keras inference model on four images (one holding a NaN), and
    # its calibrated int8 LiteRT export: about 5 min on our CPU, so
    # `large` (CI checks Efficient-CapsNet above).
    for name, entry in sorted(MODELS.items()):
        if name in _SERVED_AS_ANOTHER:
            continue
        recipe = entry.family
        model = recipe.builder(recipe_datasets.dataset_for(recipe))
        shape = tuple(model.inputs[0].shape[1:])
        images = _images(shape, count=4)
        reconstruction = recipe.has_decoder
        layers = {layer.name for layer in model.layers}
        expected = (_keras_outputs(model, images, reconstruction)
                    if "label" in layers or "mask" in layers
                    else {model.output_names[0]: keras.ops.convert_to_numpy(
                        model(images))})
        for export_format in _FORMATS:
            folder = str(tmp_path / f"{name}_{export_format}")
            if (name, export_format) in _NOT_IN_LITERT:
                with pytest.raises(ValueError, match=_NOT_IN_LITERT[
                        name, export_format]):
                    export_inference_model(model, folder,
                                           reconstruction=reconstruction,
                                           format=export_format)
                assert not os.path.exists(folder)
                continue
            export_inference_model(model, folder,
                                   reconstruction=reconstruction,
                                   format=export_format)
            outputs = ExportedClassifier(folder)(images)
            try:
                _check_served(outputs, expected, 1e-4)
            except AssertionError as error:
                raise AssertionError(f"{name}, {export_format}") from error
        if (name, "litert") not in _NOT_IN_LITERT:
            _check_calibrated_int8_runs(model, images,
                                        str(tmp_path / f"{name}_int8"))


def _check_calibrated_int8_runs(model, images, folder):
    """A calibrated int8 LiteRT export of `model` converts and runs every
    kernel LiteRT gives it: finite outputs for finite and blank images,
    NaN for the image holding a NaN. (How close it stays to the float
    model is a property of the trained model and its calibration images:
    benchmarks/litert_int8.py measures it on real test sets.)"""
    calibration = np.random.default_rng(1).uniform(
        0, 255, (8, *images.shape[1:])).astype("float32")
    export_inference_model(model, folder, format="litert", quantize="int8",
                           representative_images=calibration)
    blank = np.zeros((1, *images.shape[1:]), "float32")
    for name, value in ExportedClassifier(folder)(
            np.concatenate([images, blank])).items():
        assert np.isfinite(np.delete(value, 3, axis=0)).all(), name
        assert np.isnan(value[3]).all(), name


def test_int8_litert_stores_8_bit_weights_close_to_the_float_model(
        tmp_path):
    keras.utils.set_random_seed(2)
    model = EfficientCapsNet("mnist", input_shape=_SHAPE,
                             reconstruction=False)
    model_path = str(tmp_path / "model.keras")
    model.save(model_path)
    folders = {}
    for quantize in (None, "int8"):
        folder = str(tmp_path / f"export_{quantize}")
        extra = [] if quantize is None else ["--quantize", quantize]
        assert main(["export", "--model-path", model_path, "--export-dir",
                     folder, "--format", "litert", *extra]) == 0
        folders[quantize] = folder
    with open(os.path.join(folders["int8"], "keras_caps_export.json")) as f:
        quantization = json.load(f)["quantization"]
    assert (quantization["mode"], quantization["activations"]) == (
        "int8", "float32")
    # The vote kernel of the capsule layer and the convolutions' kernels.
    assert any("digit_caps" in name
               for name in quantization["int8_weights"])
    assert any("conv" in name for name in quantization["int8_weights"])
    sizes = {quantize: os.path.getsize(os.path.join(folder, "model.tflite"))
             for quantize, folder in folders.items()}
    # The convolutions' and the capsule votes' weights: 4 bytes -> 1.
    assert sizes["int8"] < 0.5 * sizes[None]
    expected = _keras_outputs(model, _images(), False)
    quantized = ExportedClassifier(folders["int8"])(_images())
    # 8-bit weights move the capsule lengths (in [0, 1]) by at most a few
    # thousandths on random images.
    _check_served(quantized, expected, 2e-2)
    finite = [0, 1, 2, 4, 5, 6]
    assert np.abs(quantized["length"][finite]
                  - expected["length"][finite]).max() > 1e-6


@pytest.mark.parametrize("arguments, message", [
    (["--format", "onnx", "--quantize", "int8"],
     r"`quantize` \(--quantize int8\) makes a LiteRT model.*"
     r"format='onnx'"),
    (["--format", "litert", "--precision", "mixed_float16"],
     "LiteRT export computes in float32"),
    (["--format", "openvino", "--precision", "mixed_bfloat16"],
     "OpenVINO export computes in float32"),
    (["--format", "tflite"], "invalid choice: 'tflite'"),
    (["--format", "litert", "--calibration-images", "8"],
     "`--calibration-images` calibrates 8-bit activations: add "
     "`--quantize int8`"),
    (["--format", "litert", "--quantize", "int8", "--calibration-images",
      "0"], "expected a positive integer, received '0'"),
    # A model without its run's metrics.json: no training images known.
    (["--format", "litert", "--quantize", "int8", "--calibration-images",
      "8"], "metrics.json beside it, which is missing"),
])
def test_refused_exports_write_nothing(tmp_path, arguments, message):
    model_path = str(tmp_path / "model.keras")
    EfficientCapsNet("mnist", input_shape=_SHAPE,
                     reconstruction=False).save(model_path)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            code = main(["export", "--model-path", model_path,
                         "--export-dir", str(tmp_path / "export"),
                         *arguments])
        except SystemExit as exit:  # argparse's own refusals.
            code = exit.code
    assert code == 2
    # One line of error (argparse prints its usage above it).
    assert re.search(message, stderr.getvalue().strip().splitlines()[-1])
    assert sorted(os.listdir(tmp_path)) == ["model.keras"]




@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """`(model_path, data_dir)` of a two-step `keras-caps train` run on
    MNIST-format digits, with its run records beside the model."""
    folder = tmp_path_factory.mktemp("trained_run")
    data_dir = write_idx_dataset(str(folder / "mnist"),
                                 synthetic_digits(64), synthetic_digits(24))
    run = str(folder / "run")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["train", "--model", "efficient_capsnet",
                     "--data-dir", data_dir, "--epochs", "1",
                     "--steps-per-epoch", "2", "--batch-size", "8",
                     "--output-dir", run]) == 0
    return os.path.join(run, "model.keras"), data_dir


def test_evaluate_scores_each_export_as_its_keras_model(tmp_path,
                                                        trained_run):
    # `keras-caps evaluate --model-path EXPORT` on a run's test set: every
    # format gives the .keras model's accuracy (the same predictions up
    # to float rounding) on the same images.
    model_path, data_dir = trained_run
    records = {}
    for export_format in ("keras", "saved_model", "onnx", "litert",
                          "openvino"):
        path = model_path
        if export_format != "keras":
            path = str(tmp_path / f"export_{export_format}")
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["export", "--model-path", model_path,
                             "--export-dir", path, "--format",
                             export_format]) == 0
        stdout = io.StringIO()
        report = tmp_path / f"report_{export_format}"
        with contextlib.redirect_stdout(stdout):
            assert main(["evaluate", "--model-path", path, "--data-dir",
                         data_dir, "--class-report", str(report)]) == 0
        records[export_format] = json.loads(stdout.getvalue())
        with open(report / "class_report.json") as file:
            records[export_format]["report"] = json.load(file)
    expected = records.pop("keras")
    accuracy = expected["test"]["length_accuracy"]
    for export_format, record in records.items():
        # The same predictions, image by image, as the .keras model's.
        assert (record["report"]["confusion_matrix"]
                == expected["report"]["confusion_matrix"]), export_format
        assert record["export_format"] == export_format
        assert record["test_images"] == 24
        assert record["test"]["accuracy"] == pytest.approx(accuracy,
                                                           abs=1e-6)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert main(["evaluate", "--model-path",
                     str(tmp_path / "export_onnx"), "--data-dir", data_dir,
                     "--noise", "0.1"]) == 2
    assert "scored on the clean test set only" in stderr.getvalue()


def test_calibrated_int8_litert_computes_in_8_bits_but_divides_in_float(
        tmp_path, trained_run):
    # `--calibration-images`: 8-bit activations wherever LiteRT has int8
    # kernels, calibrated on the run's training images; the squash's
    # divisions stay float32, so a blank image (capsule lengths 0) runs.
    model_path, data_dir = trained_run
    folder = str(tmp_path / "export")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["export", "--model-path", model_path, "--export-dir",
                     folder, "--format", "litert", "--quantize", "int8",
                     "--calibration-images", "16", "--data-dir",
                     data_dir]) == 0
    with open(os.path.join(folder, "keras_caps_export.json")) as file:
        quantization = json.load(file)["quantization"]
    assert (quantization["activations"],
            quantization["calibration_images"]) == ("int8", 16)
    # The convolutions and the votes in int8; the routing's and the
    # squash's element-wise maths in float32.
    assert {"CONV_2D", "BATCH_MATMUL"} <= set(quantization["int8_ops"])
    assert set(quantization["int8_ops"]) <= set(INT8_OPS)
    assert {"DIV", "EXP", "SQRT"} <= set(quantization["float32_ops"])
    assert quantization["int8_weights"]
    model = keras.saving.load_model(model_path)
    images = np.concatenate([_images((28, 28, 1)),
                             np.zeros((1, 28, 28, 1), "float32")])
    expected = _keras_outputs(model, images, False)
    served = ExportedClassifier(folder)(images)
    # 8-bit activations move the capsule lengths (in [0, 1]) by a few
    # thousandths at most, the blank image's too (no division by zero).
    _check_served({"length": served["length"][:-1]},
                  {"length": expected["length"][:-1]}, 1e-2)
    np.testing.assert_allclose(served["length"][-1],
                               expected["length"][-1], atol=1e-2)


def test_calibration_sample_is_seeded_training_images(trained_run):
    from keras_caps.datasets import idx
    from keras_caps.training.calibration_sample import calibration_images

    model_path, data_dir = trained_run
    draws = [calibration_images(model_path, (28, 28, 1), 10,
                                data_dir=data_dir, seed=seed)
             for seed in (0, 0, 1)]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], draws[2])
    training = idx.read_idx_dataset(data_dir)["train"][0].reshape(
        64, -1).astype("float32")
    for image in draws[0]:  # Each is a distinct training image.
        assert (training == image.reshape(-1)).all(axis=1).sum() >= 1
    assert len({image.tobytes() for image in draws[0]}) == 10
    # More than the split holds: all of them, once.
    assert len(calibration_images(model_path, (28, 28, 1), 500,
                                  data_dir=data_dir)) == 64


@pytest.mark.parametrize("images, options, message", [
    (np.zeros((4, 8, 8, 1)), {}, r"shape \(count, 16, 16, 1\)\. "
     r"Received: shape \(4, 8, 8, 1\)"),
    (np.zeros((0, 16, 16, 1)), {}, "holds no images"),
    (np.full((4, 16, 16, 1), 0.5), {}, "look scaled to"),
    (np.full((4, 16, 16, 1), 200.0), {"input_range": "unit"},
     r"input_range='unit': \[0, 1\]"),
    (np.full((4, 16, 16, 1), np.nan), {}, "NaN or infinite"),
    (np.array([["a"] * 16] * 16), {}, "numeric images"),
    (np.zeros((4, 16, 16, 1)), {"quantize": None},
     "need quantize='int8'"),
])
def test_bad_representative_images_are_refused_before_writing(
        tmp_path, images, options, message):
    model = EfficientCapsNet("mnist", input_shape=_SHAPE,
                             reconstruction=False)
    options = {"format": "litert", "quantize": "int8", **options}
    with pytest.raises(ValueError, match=message):
        export_inference_model(model, str(tmp_path / "export"),
                               representative_images=images, **options)
    assert os.listdir(tmp_path) == []
