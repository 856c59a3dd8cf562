"""Which export formats this installation can write, checked up front.

Imports neither TensorFlow nor any converter: it only looks them up, so
the check runs before a model is loaded, trained or anything is written.
"""

import importlib.util

import keras

from keras_caps.validation import check_choice

EXPORT_FORMATS = ("saved_model", "onnx", "litert", "openvino")
"""The formats of `export_inference_model` and `keras-caps export
--format`: a TensorFlow SavedModel folder, an ONNX model, a LiteRT
(TensorFlow Lite) model, or an OpenVINO model."""

FLOAT32_FORMATS = ("onnx", "litert", "openvino")
"""The formats whose exporters take float32 models only."""

# What Keras' ONNX exporter (`model.export(format="onnx")`, Keras 3.15)
# converts the model with on each backend, beside `onnx` itself (which
# keras_caps uses to name the outputs): tf2onnx on TensorFlow, jax2onnx on
# JAX (no TensorFlow), `torch.onnx` (part of PyTorch) on PyTorch.
_ONNX_CONVERTERS = {"tensorflow": ("tf2onnx",), "jax": ("jax2onnx",),
                    "torch": ()}

_ONNX_EXTRA = {"tensorflow": "onnx", "jax": "onnx-jax", "torch": "onnx"}


def check_export_support(format="saved_model", backend=None, precision=None):
    """Raises a one-line `ValueError` unless `format` can be written here.

    A SavedModel needs TensorFlow installed, and the TensorFlow or JAX
    backend (Keras writes PyTorch models as SavedModels only through
    torch_xla). An ONNX model needs the TensorFlow, JAX or PyTorch backend
    and, beside the `onnx` package, the converter Keras uses on that
    backend: tf2onnx (TensorFlow), jax2onnx (JAX) or nothing more
    (PyTorch's own `torch.onnx`). Each message names what to install or
    to use instead. An ONNX model computes in float32 (Keras' ONNX
    exporter takes float32 models only): a 16-bit `precision` is refused.

    A LiteRT model is converted by TensorFlow's converter on the
    TensorFlow backend; an OpenVINO model too, with the `openvino`
    package.

    Args:
        format: `"saved_model"`, `"onnx"`, `"litert"` or `"openvino"`.
        backend: str or `None` (the current Keras backend).
        precision: The export's `precision` (see `export_inference_model`).

    Raises:
        ValueError: the format cannot be written with this backend and
            these packages.

    Example:

    >>> check_export_support("onnx", backend="numpy")
    Traceback (most recent call last):
    ...
    ValueError: The ONNX export runs on the TensorFlow, JAX and PyTorch \
backends: set KERAS_BACKEND to one of them. Received: backend 'numpy'
    """
    check_choice("format", format, EXPORT_FORMATS)
    backend = keras.backend.backend() if backend is None else backend
    if format == "saved_model":
        _check_saved_model_support(backend)
    elif format == "onnx":
        _check_onnx_support(backend)
    elif format == "litert":
        _check_litert_support(backend)
    else:
        _check_openvino_support(backend)
    if format in FLOAT32_FORMATS and precision not in (None, "float32"):
        raise ValueError(
            f"The {_NAMES[format]} export computes in float32 (Keras' "
            f"{_NAMES[format]} exporter takes float32 models only): leave "
            "`precision` (`--precision`) unset, or export a SavedModel for "
            f"16-bit convolutions. Received: precision={precision!r}")


_NAMES = {"saved_model": "SavedModel", "onnx": "ONNX", "litert": "LiteRT",
          "openvino": "OpenVINO"}


def check_quantize(quantize, format):
    """Raises a one-line `ValueError` unless `quantize` suits `format`.

    `quantize="int8"` is a LiteRT export with 8-bit weights (see
    `export_inference_model`); the other formats hold float32 graphs.

    Example:

    >>> check_quantize("int8", "onnx")
    Traceback (most recent call last):
    ...
    ValueError: `quantize` (--quantize int8) makes a LiteRT model with \
8-bit weights: export with format='litert' (--format litert). Received: \
quantize='int8', format='onnx'
    """
    if quantize is None:
        return
    check_choice("quantize", quantize, ("int8",))
    if format != "litert":
        raise ValueError(
            "`quantize` (--quantize int8) makes a LiteRT model with 8-bit "
            "weights: export with format='litert' (--format litert). "
            f"Received: quantize={quantize!r}, format={format!r}")


def _check_saved_model_support(backend):
    if backend == "torch":
        raise ValueError(
            "The SavedModel export does not run on the PyTorch backend "
            "(Keras writes PyTorch models as SavedModels only through "
            "torch_xla): export with `--format onnx` (format=\"onnx\"), or "
            "run the export with KERAS_BACKEND=tensorflow or jax (a .keras "
            "file loads on any backend). Received: backend 'torch'")
    if backend not in ("tensorflow", "jax"):
        raise ValueError(
            "The SavedModel export runs on the TensorFlow and JAX "
            "backends: set KERAS_BACKEND to one of them. Received: backend "
            f"{backend!r}")
    if not _installed("tensorflow"):
        raise ValueError(
            "The SavedModel export needs TensorFlow, which is not "
            "installed: pip install tensorflow, or export with `--format "
            "onnx` (format=\"onnx\"; pip install "
            f"'keras-caps[{_ONNX_EXTRA[backend]}]'), which needs no "
            "TensorFlow.")


def _check_onnx_support(backend):
    if backend not in _ONNX_CONVERTERS:
        raise ValueError(
            "The ONNX export runs on the TensorFlow, JAX and PyTorch "
            "backends: set KERAS_BACKEND to one of them. Received: backend "
            f"{backend!r}")
    missing = [name for name in ("onnx", *_ONNX_CONVERTERS[backend])
               if not _installed(name)]
    if missing:
        raise ValueError(
            f"The ONNX export on the {backend} backend needs "
            f"{' and '.join(missing)}, not installed here: pip install "
            f"'keras-caps[{_ONNX_EXTRA[backend]}]' (or pip install "
            f"{' '.join(missing)}).")


def _check_litert_support(backend):
    if backend != "tensorflow":
        raise ValueError(
            "The LiteRT export converts with TensorFlow's converter, on the "
            "TensorFlow backend: run it with KERAS_BACKEND=tensorflow (a "
            ".keras file loads on any backend), or export with `--format "
            f"onnx` or `openvino`. Received: backend {backend!r}")
    if not _installed("tensorflow"):
        raise ValueError(
            "The LiteRT export needs TensorFlow's converter, which is not "
            "installed: pip install 'keras-caps[litert]'.")


def _check_openvino_support(backend):
    if backend != "tensorflow":
        raise ValueError(
            "The OpenVINO export converts on the TensorFlow backend "
            "(OpenVINO cannot convert the XlaCallModule of a JAX graph, and "
            "PyTorch's trace loses the dynamic batch): run it with "
            "KERAS_BACKEND=tensorflow (a .keras file loads on any backend), "
            f"or export with `--format onnx`. Received: backend {backend!r}")
    if not _installed("openvino"):
        raise ValueError(
            f"The OpenVINO export on the {backend} backend needs openvino, "
            "not installed here: pip install 'keras-caps[openvino]' (or pip "
            "install openvino).")


def _installed(name):
    """Whether the top-level module `name` can be imported (without
    importing it); `False` where an import hook refuses it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
