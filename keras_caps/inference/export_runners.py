"""The runtimes that run a keras_caps export other than a SavedModel: ONNX
Runtime, the LiteRT interpreter and OpenVINO's runtime.

Each loader returns a `LoadedExport`: the image shape it takes, its outputs
(`{name: shape without the batch}`) and a function from float32 images to
a dict of float32 NumPy arrays. A missing runtime is one line naming what
to install. No runtime is imported before a loader runs.
"""

import dataclasses
import os
from collections.abc import Callable

import numpy as np

from keras_caps import model_roles as roles

ONNX_FILE = "model.onnx"
"""The ONNX model inside an ONNX export folder."""

LITERT_FILE = "model.tflite"
"""The LiteRT model inside a LiteRT export folder."""

OPENVINO_FILE = "model.xml"
"""The OpenVINO graph inside an OpenVINO export folder (its weights are
`model.bin` beside it)."""


@dataclasses.dataclass(frozen=True)
class LoadedExport:
    """An export loaded in its runtime.

    Attributes:
        image_shape: `(height, width, channels)` it takes.
        output_shapes: dict. `{name: shape without the batch}`, in order.
        run: `run(images)`: float32 `(batch, height, width, channels)` in
            the export's input range to `{name: float32 array}`.

    Example:

    ```python
    loaded = load_litert("exported/mnist", "`model`", ["length"])
    loaded.run(np.zeros((2, *loaded.image_shape), "float32"))["length"]
    ```
    """

    image_shape: tuple
    output_shapes: dict
    run: Callable


def load_onnx(path, where):
    """`path/model.onnx` in ONNX Runtime."""
    onnxruntime = _runtime("onnxruntime", where, "an ONNX export",
                           "onnxruntime")
    try:
        session = onnxruntime.InferenceSession(os.path.join(path, ONNX_FILE))
    except Exception as error:  # ONNX Runtime's own error types.
        raise _load_error("the ONNX model", where, error) from None
    names = [output.name for output in session.get_outputs()]

    def run(images):
        return dict(zip(names, session.run(names, {roles.IMAGE: images}),
                        strict=True))

    shapes = {output.name: tuple(output.shape[1:])
              for output in session.get_outputs()}
    return LoadedExport(tuple(session.get_inputs()[0].shape[1:]), shapes,
                        _taking_empty_batches(run, shapes))


def litert_interpreter(path):
    """The LiteRT interpreter (`ai_edge_litert`) of the file `path`;
    `None` if `ai-edge-litert` is not installed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    return Interpreter(model_path=path)


def load_litert(path, where, output_names):
    """`path/model.tflite` in the LiteRT interpreter; its `output_i` are
    `output_names[i]`."""
    try:
        interpreter = litert_interpreter(os.path.join(path, LITERT_FILE))
    except (ValueError, RuntimeError) as error:
        raise _load_error("the LiteRT model", where, error) from None
    if interpreter is None:
        raise ValueError(
            f"{where} is a LiteRT export, which needs the LiteRT "
            "interpreter: pip install ai-edge-litert.")
    runner = interpreter.get_signature_runner()
    details = runner.get_output_details()
    positional = [f"output_{index}" for index in range(len(output_names))]
    if sorted(details) != sorted(positional):
        raise ValueError(
            f"The LiteRT model of {where} has the outputs {sorted(details)}"
            f"; its marker lists {list(output_names)}.")
    shapes = {name: tuple(int(size) for size in
                          details[key]["shape_signature"][1:])
              for name, key in zip(output_names, positional, strict=True)}

    def run(images):
        outputs = runner(**{roles.IMAGE: images})
        return {name: np.asarray(outputs[key])
                for name, key in zip(output_names, positional, strict=True)}

    image = runner.get_input_details()[roles.IMAGE]["shape_signature"]
    return LoadedExport(tuple(int(size) for size in image[1:]), shapes,
                        _taking_empty_batches(run, shapes))


def load_openvino(path, where):
    """`path/model.xml` (and `model.bin`) in OpenVINO's CPU runtime."""
    openvino = _runtime("openvino", where, "an OpenVINO export", "openvino")
    try:
        compiled = openvino.Core().compile_model(
            os.path.join(path, OPENVINO_FILE), "CPU")
    except Exception as error:  # OpenVINO's own error types.
        raise _load_error("the OpenVINO model", where, error) from None
    names = [output.get_any_name() for output in compiled.outputs]
    shapes = {name: tuple(dimension.get_length() for dimension in
                          output.get_partial_shape()[1:])
              for name, output in zip(names, compiled.outputs, strict=True)}

    def run(images):
        results = compiled(images)
        return {name: np.asarray(results[output])
                for name, output in zip(names, compiled.outputs, strict=True)}

    image = compiled.inputs[0].get_partial_shape()
    return LoadedExport(tuple(dimension.get_length()
                              for dimension in image[1:]), shapes,
                        _taking_empty_batches(run, shapes))


def _taking_empty_batches(run, shapes):
    """`run`, answering a batch of 0 images with outputs of 0 rows (the
    runtimes reject an empty batch), as the SavedModel's signature does."""
    def run_any_batch(images):
        if len(images) == 0:
            return {name: np.zeros((0, *shape), "float32")
                    for name, shape in shapes.items()}
        return run(images)

    return run_any_batch


def _runtime(module, where, what, package):
    """Imports the runtime `module`, or says what to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"{where} is {what}, which needs {module} (pip "
                         f"install {package}).") from None


def _load_error(what, where, error):
    return ValueError(f"Cannot load {what} of {where}: "
                      f"{' '.join(str(error).split())[:300]}")
