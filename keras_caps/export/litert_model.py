"""LiteRT (TensorFlow Lite) export of the inference graph, through Keras'
own exporter (`model.export(format="litert")`, TensorFlow's converter).

The `.tflite` file's `serving_default` signature takes `image` and returns
`output_0`, `output_1`, ... in the order the export's marker lists under
`"outputs"` (LiteRT names a Keras model's outputs by position).
"""

import os
import warnings

import numpy as np

from keras_caps.export.calibration import convert_calibrated_int8
from keras_caps.export.serving_graph import output_shapes
from keras_caps.export.serving_graph import serving_graph
from keras_caps.inference.export_runners import LITERT_FILE
from keras_caps.inference.export_runners import litert_interpreter


def write_litert(model, folder, input_range, quantize=None,
                 representative_images=None):
    """Writes `model` (a serving model) to `folder/model.tflite`.

    The graph is `serving_graph`'s: `image`, float32 `(batch, height,
    width, channels)` with a dynamic batch, [0, 1] inputs scaled to pixels
    for `input_range="unit"`, NaN outputs for non-finite images.

    Args:
        model: A serving model.
        folder: str. An existing, empty folder.
        input_range: `"pixels"` or `"unit"`.
        quantize: `None` (float32) or `"int8"`: TensorFlow's converter
            stores the weights of the convolutions, the dense layers and
            the capsule layers' vote kernels in 8 bits with per-channel
            scales (dynamic-range quantization); activations, the routing
            and the squash stay float32.
        representative_images: `None`, or with `quantize="int8"` a float32
            array `(count, height, width, channels)` in the export's input
            range (checked by `check_representative_images`): the
            converter calibrates on them and the convolutions, dense
            layers and matrix products (the votes) compute in 8 bits; the
            routing's element-wise maths (softmaxes, the squash, EM's
            statistics) stays float32, with quantize and dequantize steps
            between (`calibration.INT8_OPS`).

    Returns:
        `None`, or with `quantize="int8"` the marker's `"quantization"`
        record: the mode, the activations (`"float32"`, or `"int8"` with
        the number of calibration images), the names of the weight
        tensors stored in 8 bits, and how many operations of each kind
        compute in int8 and in float32.

    Raises:
        ValueError: the converted model does not have the expected input
            and outputs, or LiteRT's built-in kernels cannot run it.
    """
    import tensorflow as tf

    shapes = output_shapes(model)
    graph = serving_graph(model, input_range, shapes)
    image_shape = tuple(model.inputs[0].shape[1:])
    path = os.path.join(folder, LITERT_FILE)
    if representative_images is not None:
        with open(path, "wb") as file:
            file.write(convert_calibrated_int8(graph, image_shape,
                                               representative_images))
    else:
        options = {}
        if quantize == "int8":
            options["optimizations"] = [tf.lite.Optimize.DEFAULT]
        with warnings.catch_warnings():
            # The converter's deprecation notices say nothing about the
            # model, which is checked below.
            warnings.simplefilter("ignore")
            graph.export(path, format="litert", verbose=False, **options)
    _check_signature(path, image_shape, shapes)
    if quantize is None:
        return None
    record = {"mode": quantize, "activations": "float32"}
    if representative_images is not None:
        record.update(activations="int8",
                      calibration_images=len(representative_images))
    # A new interpreter: once run, LiteRT lists the delegated operations
    # as one `DELEGATE` each.
    return {"quantization": {**record,
                             **_quantized_parts(_interpreter(path))}}


def _quantized_parts(interpreter):
    """What the converter stored and computes in 8 bits: the weight
    tensors (by the converter's names: the Keras layers' after
    dynamic-range quantization, its own `arith.constant...` after
    calibration) and, by kind, the operations whose outputs are int8 or
    float32 (quantize and dequantize steps left out)."""
    tensors = interpreter.get_tensor_details()
    dtypes = {detail["index"]: detail["dtype"] for detail in tensors}
    operations = {"int8_ops": {}, "float32_ops": {}}
    details = interpreter._get_ops_details()
    # A weight is an operation's input that no operation computes (the
    # image input is float32).
    computed = {int(index) for operation in details
                for index in operation["outputs"]}
    consumed = {int(index) for operation in details
                for index in operation["inputs"]}
    for operation in details:
        name = operation["op_name"]
        if name in ("QUANTIZE", "DEQUANTIZE") or not len(
                operation["outputs"]):
            continue
        dtype = dtypes.get(int(operation["outputs"][0]))
        kind = {np.int8: "int8_ops", np.float32: "float32_ops"}.get(dtype)
        if kind is not None:
            operations[kind][name] = operations[kind].get(name, 0) + 1
    weights = sorted(detail["name"] for detail in tensors
                     if detail["dtype"] == np.int8
                     and detail["index"] in consumed - computed)
    return {"int8_weights": weights,
            **{kind: dict(sorted(counts.items()))
               for kind, counts in operations.items()}}


def _check_signature(path, image_shape, shapes):
    """Checks the converted file: LiteRT's own kernels run it, with one
    `image` input with a dynamic batch and the outputs of `shapes`, in
    order."""
    interpreter = _interpreter(path)
    _check_builtin_kernels(interpreter, image_shape)
    signature = interpreter.get_signature_runner()
    inputs = signature.get_input_details()
    outputs = signature.get_output_details()
    received_inputs = {name: tuple(int(size) for size in
                                   detail["shape_signature"])
                       for name, detail in inputs.items()}
    if received_inputs != {"image": (-1, *image_shape)}:
        raise ValueError(
            f"The LiteRT converter wrote the inputs {received_inputs}; "
            f"expected {{'image': {(-1, *image_shape)}}}.")
    expected = {f"output_{index}": (-1, *shape)
                for index, shape in enumerate(shapes.values())}
    received = {name: tuple(int(size) for size in detail["shape_signature"])
                for name, detail in outputs.items()}
    if received != expected:
        raise ValueError(
            f"The LiteRT converter wrote the outputs {received}; expected "
            f"{expected} ({list(shapes)}).")


def _interpreter(path):
    """LiteRT's interpreter of the file `path` (TensorFlow's own without
    ai-edge-litert)."""
    interpreter = litert_interpreter(path)
    if interpreter is None:
        import tensorflow as tf

        interpreter = tf.lite.Interpreter(model_path=path)
    return interpreter


def _check_builtin_kernels(interpreter, image_shape):
    """Refuses a model LiteRT's built-in kernels cannot run: one that needs
    TensorFlow ops (the Flex delegate, which phones and microcontrollers
    lack) or tensors of more than 5 dimensions (matrix capsules' votes)."""
    tensorflow_ops = sorted({detail["op_name"] for detail in
                             interpreter._get_ops_details()
                             if detail["op_name"].startswith("Flex")})
    problem = (f"it needs TensorFlow ops {tensorflow_ops}"
               if tensorflow_ops else None)
    if problem is None:
        try:
            interpreter.get_signature_runner()(
                image=np.zeros((1, *image_shape), "float32"))
        except RuntimeError as error:
            problem = " ".join(str(error).split())[:200]
    if problem is not None:
        raise ValueError(
            "LiteRT's built-in kernels cannot run this model "
            f"({problem}; matrix capsules route 6-dimensional tensors, "
            "beyond LiteRT's 5): export it with `--format onnx` or "
            "`openvino` instead.")
