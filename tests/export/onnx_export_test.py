"""ONNX export on every backend, and the SavedModel from JAX.

Each export is checked against the Keras model's own outputs on the
backend that exported it (ONNX Runtime or TensorFlow runs the export), at
batch sizes 1 and 7 (and 0 where the export serves it), for the serving
contract: one `image` input with a dynamic batch, outputs named after the
model's (`length`, `reconstruction`), NaN for images holding a NaN. JAX
and PyTorch export in a fresh process where TensorFlow cannot be imported.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.cli import main
from keras_caps.export import check_export_support
from keras_caps.export import export_inference_model
from keras_caps.export import export_support
from keras_caps.export.onnx_model import check_onnx_convertible
from keras_caps.inference import ExportedClassifier
from keras_caps.testing.without_tensorflow import REFUSE_TENSORFLOW
from keras_caps.testing.xla_flags import fast_xla_flags
from tests.folder_contents import folder_contents

ort = pytest.importorskip("onnxruntime")

_SHAPE = (16, 16, 1)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
# The subprocesses' environment. XLA compiles fast (as for the JAX tests):
# the code runs slower, with the same results, and compiles much faster,
# which is most of a tiny export's time.
_FAST_COMPILE = fast_xla_flags("jax")


def _environment(backend):
    return dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=_REPO,
                TF_CPP_MIN_LOG_LEVEL="3", XLA_FLAGS=_FAST_COMPILE)


# Exports a seeded tiny Efficient-CapsNet in each format of `case` and
# saves the Keras model's outputs for `case["images"]` beside them.
_EXPORT = """
import json
import sys

import keras
import numpy as np

from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import inference_model
from keras_caps.export import export_inference_model

case = json.loads(sys.argv[1])
keras.utils.set_random_seed(0)
model = EfficientCapsNet("mnist", input_shape=(16, 16, 1))
for format, path in case["exports"].items():
    export_inference_model(model, path, reconstruction=True, format=format,
                           input_range="unit")
images = np.load(case["images"])
# The images are in [0, 1], as the exports take them; the model takes pixels.
expected = inference_model(model, reconstruction=True)(images * 255.0)
np.savez(case["expected"], **{name: keras.ops.convert_to_numpy(value)
                              for name, value in expected.items()})
print(json.dumps({"tensorflow": "tensorflow" in sys.modules}))
"""


def _images():
    """7 raw-pixel images, the fourth holding a NaN."""
    images = np.random.default_rng(0).uniform(
        0, 255, (7, *_SHAPE)).astype("float32")
    images[3, 5, 5, 0] = np.nan
    return images


def _run_onnx(folder, images):
    """`(outputs by name, session)` of ONNX Runtime on `folder/model.onnx`
    for [0, 1] images."""
    session = ort.InferenceSession(os.path.join(folder, "model.onnx"))
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, {"image": images}),
                    strict=True)), session


def _check_served(outputs, expected, count):
    """The served outputs of the first `count` images: the Keras model's
    for finite images, NaN for the fourth (it holds a NaN)."""
    assert sorted(outputs) == ["length", "reconstruction"]
    for name, value in outputs.items():
        value = np.asarray(value)
        assert value.shape == (count, *expected[name].shape[1:])
        assert value.dtype == np.float32
        finite = [index for index in range(count) if index != 3]
        np.testing.assert_allclose(value[finite], expected[name][finite],
                                   atol=1e-5)
        if count > 3:
            assert np.isnan(value[3]).all()


def _check_onnx_export(folder, expected, batch_sizes):
    for count in batch_sizes:
        outputs, session = _run_onnx(folder, _images()[:count] / 255.0)
        _check_served(outputs, expected, count)
    (image,) = session.get_inputs()
    assert (image.name, image.shape, image.type) == (
        "image", ["batch", *_SHAPE], "tensor(float)")
    assert [(output.name, output.shape)
            for output in session.get_outputs()] == [
        ("length", ["batch", 10]), ("reconstruction", ["batch", *_SHAPE])]
    with open(os.path.join(folder, "keras_caps_export.json")) as file:
        marker = json.load(file)
    assert marker["format"] == "onnx"
    assert marker["input_range"] == "unit"
    assert sorted(marker["contents"]) == ["model.onnx"]
    assert sorted(os.listdir(folder)) == ["keras_caps_export.json",
                                          "model.onnx"]


def _export_in_subprocess(tmp_path, backend, formats, without_tensorflow):
    """Runs `_EXPORT` on `backend`; returns the exports' folders by
    format, the Keras model's outputs and whether TensorFlow got
    imported."""
    np.save(tmp_path / "images.npy", _images() / 255.0)
    case = {"exports": {format: str(tmp_path / format) for format in formats},
            "images": str(tmp_path / "images.npy"),
            "expected": str(tmp_path / "expected.npz")}
    code = (REFUSE_TENSORFLOW if without_tensorflow else "") + _EXPORT
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(case)], capture_output=True,
        text=True, check=False, timeout=600, env=_environment(backend))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return case["exports"], dict(np.load(case["expected"])), report


def test_onnx_export_on_this_backend_matches_the_keras_model(tmp_path):
    # Through `keras-caps export --format onnx`, from a saved .keras file.
    keras.utils.set_random_seed(1)
    model = EfficientCapsNet("mnist", input_shape=_SHAPE)
    model_path = str(tmp_path / "model.keras")
    model.save(model_path)
    folder = str(tmp_path / "export")
    assert main(["export", "--model-path", model_path, "--export-dir",
                 folder, "--format", "onnx", "--reconstruction",
                 "--input-range", "unit"]) == 0
    expected = {name: keras.ops.convert_to_numpy(value) for name, value in
                inference_model(model, reconstruction=True)(
                    _images()).items()}
    # tf2onnx's batched einsum cannot take a batch of 0; the JAX and
    # PyTorch exports can (below).
    _check_onnx_export(folder, expected, (1, 7))
    # `keras-caps predict`'s reader: raw pixels in, through ONNX Runtime.
    classifier = ExportedClassifier(folder)
    assert (classifier.image_shape, classifier.score_name,
            classifier.num_classes, classifier.has_reconstruction) == (
        _SHAPE, "length", 10, True)
    _check_served(classifier(_images()), expected, 7)


@pytest.mark.single_backend
@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed")
def test_onnx_export_on_torch_without_tensorflow(tmp_path):
    exports, expected, report = _export_in_subprocess(
        tmp_path, "torch", ["onnx"], without_tensorflow=True)
    assert report == {"tensorflow": False}
    _check_onnx_export(exports["onnx"], expected, (0, 1, 7))


@pytest.mark.single_backend
@pytest.mark.skipif(importlib.util.find_spec("jax2onnx") is None,
                    reason="jax2onnx is not installed")
def test_onnx_export_on_jax_without_tensorflow(tmp_path):
    exports, expected, report = _export_in_subprocess(
        tmp_path, "jax", ["onnx"], without_tensorflow=True)
    assert report == {"tensorflow": False}
    _check_onnx_export(exports["onnx"], expected, (0, 1, 7))


@pytest.mark.single_backend
def test_saved_model_export_on_jax_serves_the_signature(tmp_path):
    tf = pytest.importorskip("tensorflow")
    exports, expected, _ = _export_in_subprocess(
        tmp_path, "jax", ["saved_model"], without_tensorflow=False)
    served = tf.saved_model.load(exports["saved_model"])
    assert sorted(served.signatures) == ["serve", "serving_default"]
    spec = served.signatures["serve"].structured_input_signature[1]["image"]
    assert (spec.shape.as_list(), spec.dtype) == ([None, *_SHAPE],
                                                  tf.float32)
    for count in (0, 1, 7):
        outputs = served.serve(tf.constant(_images()[:count] / 255.0))
        _check_served(outputs, expected, count)


@pytest.mark.single_backend
def test_exports_without_tensorflow_refuse_the_saved_model(tmp_path):
    # No TensorFlow: the SavedModel is refused in one line naming what to
    # install, before anything is written (or the model looked at: none is
    # given); ONNX is what to use instead.
    code = REFUSE_TENSORFLOW + textwrap.dedent(f"""
        from keras_caps.export import export_inference_model
        try:
            export_inference_model(None, {str(tmp_path / "export")!r})
        except ValueError as error:
            print(error)
    """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        check=False, timeout=600, env=_environment("jax"))
    assert result.returncode == 0, result.stderr[-3000:]
    message = result.stdout.strip().splitlines()[-1]
    assert message.startswith("The SavedModel export needs TensorFlow, "
                              "which is not installed: pip install "
                              "tensorflow, or export with `--format onnx`")
    assert "keras-caps[onnx-jax]" in message
    assert os.listdir(tmp_path) == []


@pytest.mark.single_backend
@pytest.mark.parametrize("format, backend, missing, expected", [
    ("saved_model", "torch", (), "does not run on the PyTorch backend.*"
     "torch_xla.*--format onnx.*KERAS_BACKEND=tensorflow or jax"),
    ("saved_model", "numpy", (), "TensorFlow and JAX backends.*"
     "backend 'numpy'"),
    ("onnx", "numpy", (), "TensorFlow, JAX and PyTorch backends.*"
     "backend 'numpy'"),
    ("onnx", "jax", ("jax2onnx",), "on the jax backend needs jax2onnx, not "
     r"installed here: pip install 'keras-caps\[onnx-jax\]' \(or pip "
     r"install jax2onnx\)\.$"),
    ("onnx", "tensorflow", ("onnx", "tf2onnx"), "needs onnx and tf2onnx, "
     r"not installed here: pip install 'keras-caps\[onnx\]'"),
    ("onnx", "torch", ("onnx",), r"torch backend needs onnx,.*\[onnx\]"),
    ("tflite", "tensorflow", (), "`format`.*'saved_model', 'onnx'"),
    # LiteRT and OpenVINO (tests/export/litert_openvino_test.py)
    ("litert", "jax", (), "converts with TensorFlow's converter, on the "
     "TensorFlow backend.*KERAS_BACKEND=tensorflow.*backend 'jax'"),
    ("litert", "torch", (), "KERAS_BACKEND=tensorflow.*backend 'torch'"),
    ("litert", "tensorflow", ("tensorflow",),
     r"pip install 'keras-caps\[litert\]'"),
    ("openvino", "tensorflow", ("openvino",), r"on the tensorflow backend "
     r"needs openvino, not installed here: pip install "
     r"'keras-caps\[openvino\]'"),
    ("openvino", "jax", (), "converts on the TensorFlow backend.*"
     "XlaCallModule.*backend 'jax'"),
    ("openvino", "torch", (), "dynamic batch.*--format onnx.*'torch'"),
])
def test_check_export_support_names_what_to_install_or_use(
        monkeypatch, format, backend, missing, expected):
    monkeypatch.setattr(export_support, "_installed",
                        lambda name: name not in missing)
    with pytest.raises(ValueError, match=expected) as raised:
        check_export_support(format, backend=backend)
    assert "\n" not in str(raised.value)


@pytest.mark.single_backend
def test_check_export_support_accepts_what_is_installed(monkeypatch):
    monkeypatch.setattr(export_support, "_installed", lambda name: True)
    for backend in ("tensorflow", "jax", "torch"):
        check_export_support("onnx", backend=backend)
        check_export_support("onnx", backend=backend, precision="float32")
    for backend in ("tensorflow", "jax"):
        check_export_support("saved_model", backend=backend,
                             precision="mixed_bfloat16")
    with pytest.raises(ValueError, match="ONNX export computes in float32"):
        check_export_support("onnx", backend="jax", precision="mixed_float16")


def test_onnx_export_refusals_write_nothing(tmp_path):
    model = EfficientCapsNet("mnist", input_shape=_SHAPE,
                             reconstruction=False)
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="never deletes files it did "
                       "not write"):
        export_inference_model(model, str(target), format="onnx",
                               overwrite=True)
    with pytest.raises(ValueError, match="computes in float32"):
        export_inference_model(model, str(tmp_path / "new"), format="onnx",
                               precision="mixed_bfloat16")
    # The CLI refuses before loading the model (this file is no model).
    fake = tmp_path / "model.keras"
    fake.write_text("not a model")
    assert main(["export", "--model-path", str(fake), "--export-dir",
                 str(tmp_path / "new"), "--format", "onnx",
                 "--precision", "mixed_float16"]) == 2
    assert folder_contents(tmp_path) == {"out/notes.txt": b"keep me",
                                         "model.keras": b"not a model"}


@pytest.mark.single_backend
def test_layer_normalization_is_refused_on_torch_only(monkeypatch):
    # PyTorch's TorchScript exporter cannot convert Keras' layer norm with
    # a dynamic batch: refused up front, naming the layer (also inside a
    # nested model) and the backends that export it.
    inner = keras.Sequential([keras.layers.LayerNormalization(name="norm")],
                             name="block")
    image = keras.Input((4, 3), name="image")
    with_norm = keras.Model(image, inner(keras.layers.Dense(3)(image)))
    without = keras.Model(image, keras.layers.Dense(3)(image))
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    with pytest.raises(ValueError, match=r"cannot convert Keras' "
                       r"LayerNormalization.*KERAS_BACKEND=jax or "
                       r"tensorflow.*\['norm'\]$"):
        check_onnx_convertible(with_norm)
    check_onnx_convertible(without)
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    check_onnx_convertible(with_norm)


def test_onnx_export_keeps_input_statistics_as_constants(tmp_path):
    # A model standardising its pixels with a `Normalization` (as the
    # smallNORB presets do): tf2onnx would make its statistics graph
    # inputs. The export takes `image` only and matches the model, whose
    # scores are computed here by hand (independently of Keras' layers).
    mean, variance = np.array([100.0, 20.0]), np.array([400.0, 25.0])
    kernel = np.arange(2 * 3 * 3, dtype="float32").reshape(6, 3) / 10.0
    image = keras.Input((3, 1, 2), name="image")
    x = keras.layers.Normalization(mean=mean.tolist(),
                                   variance=variance.tolist(),
                                   name="input_scaling")(image)
    x = keras.layers.Flatten()(x)
    dense = keras.layers.Dense(3, use_bias=False, activation="softmax",
                               name="probabilities")
    model = keras.Model(image, dense(x))
    dense.kernel.assign(kernel)
    folder = str(tmp_path / "export")
    export_inference_model(model, folder, format="onnx")
    pixels = np.random.default_rng(2).uniform(
        0, 255, (4, 3, 1, 2)).astype("float32")
    outputs, session = _run_onnx(folder, pixels)
    assert [value.name for value in session.get_inputs()] == ["image"]
    logits = ((pixels - mean) / np.sqrt(variance)).reshape(4, 6) @ kernel
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(outputs["probabilities"], expected,
                               atol=1e-5)
