"""ONNX export of the inference graph, through Keras' own exporter.

No TensorFlow is imported here: on JAX and PyTorch the whole ONNX export
runs without it (Keras converts with jax2onnx and `torch.onnx`; with
tf2onnx on the TensorFlow backend).
"""

import os
import shutil
import tempfile
import warnings

import keras
import numpy as np

from keras_caps import model_roles as roles
from keras_caps.export.serving_graph import output_shapes
from keras_caps.export.serving_graph import serving_graph
from keras_caps.inference.export_runners import ONNX_FILE
from keras_caps.inference.model_rebuilding import as_functional
from keras_caps.inference.model_rebuilding import rebuild_model

BATCH = "batch"
"""The name of the dynamic batch dimension of the ONNX input and outputs."""


def check_onnx_convertible(model):
    """Raises a one-line `ValueError` if `model` cannot be exported to ONNX
    on this backend.

    On PyTorch, Keras exports a dynamic batch through PyTorch's TorchScript
    exporter, which cannot convert Keras' `LayerNormalization` (its
    normalised shape is read from the traced input, not a constant):
    VectorRoutingCapsNet, InvertedAttentionCapsNet, MatrixCapsNet and the
    inverted-attention CapsuleClassifier export from JAX or TensorFlow.
    """
    if keras.backend.backend() != "torch" or not isinstance(
            model, keras.layers.Layer):
        return
    found = [layer.name for layer in model._flatten_layers(
        include_self=False, recursive=True)
        if isinstance(layer, keras.layers.LayerNormalization)]
    if found:
        raise ValueError(
            "The ONNX export on the PyTorch backend cannot convert Keras' "
            "LayerNormalization (PyTorch's TorchScript exporter needs a "
            "constant normalised shape): export this model with "
            "KERAS_BACKEND=jax or tensorflow (its .keras file loads on any "
            f"backend). Received: a model named {model.name!r} with "
            f"LayerNormalization layers {found[:3]}")


def write_onnx(model, folder, input_range):
    """Writes `model` (a serving model) to `folder/model.onnx`.

    The ONNX graph takes `image`, float32 `(batch, height, width,
    channels)` with a dynamic batch, scales [0, 1] inputs to pixels
    (`input_range="unit"`), and returns the model's outputs as float32
    under their names (`"length"`, ...), NaN for every image holding a NaN
    or an infinity: the SavedModel's `serve` signature, in ONNX.
    """
    shapes = output_shapes(model)
    graph = serving_graph(_normalization_as_rescaling(model), input_range,
                          shapes)
    # The converter writes in a folder of its own (some write the weights
    # beside the graph); the export is one file, `model.onnx`.
    converted = tempfile.mkdtemp(prefix=".onnx-", dir=folder)
    try:
        with warnings.catch_warnings():
            # The converters' own notices (tracing, deprecations) say
            # nothing about the exported graph, which is checked below.
            warnings.simplefilter("ignore")
            graph.export(os.path.join(converted, ONNX_FILE), format="onnx",
                         verbose=False)
        _name_inputs_and_outputs(os.path.join(converted, ONNX_FILE),
                                 os.path.join(folder, ONNX_FILE), shapes)
    finally:
        shutil.rmtree(converted, ignore_errors=True)


def _normalization_as_rescaling(model):
    """`model` with each `Normalization` (the input standardisation of
    presets with input statistics) replaced by the `Rescaling` computing
    the same `(x - mean) / max(sqrt(variance), epsilon)` as
    `x * scale + offset`, equal to float32 rounding.

    `Normalization` holds its statistics as tensors made outside the traced
    function, which tf2onnx turns into extra graph inputs instead of
    constants; `Rescaling` makes them inside it, as constants.
    """
    if not any(isinstance(layer, keras.layers.Normalization)
               and not layer.invert for layer in model.layers):
        return model
    model, config = as_functional(model)
    weights = {}
    for entry in config["layers"]:
        layer = model.get_layer(entry["name"])
        if not isinstance(layer, keras.layers.Normalization) or layer.invert:
            weights[layer.name] = layer.get_weights()
            continue
        # (1, ..., channels): the statistics, broadcast as the layer does.
        mean = keras.ops.convert_to_numpy(layer.mean).astype("float64")
        deviation = np.maximum(np.sqrt(keras.ops.convert_to_numpy(
            layer.variance).astype("float64")), keras.backend.epsilon())
        entry.update(module="keras.layers", class_name="Rescaling",
                     registered_name=None)
        entry["config"] = {
            "name": layer.name, "dtype": entry["config"].get("dtype"),
            "scale": (1.0 / deviation).astype("float32").tolist(),
            "offset": (-mean / deviation).astype("float32").tolist()}
    return rebuild_model(config, weights)


def _name_inputs_and_outputs(converted, path, shapes):
    """Writes the ONNX model `converted` to `path` (one file), its outputs
    named after `shapes` (in order) and its batch dimensions `batch`, after
    checking that the converter kept one `image` input, a dynamic batch
    and the outputs' order and shapes."""
    import onnx

    proto = onnx.load(converted)  # With any weights written beside it.
    graph = proto.graph
    # tf2onnx may leave some constants as graph inputs with their value as
    # initializer: they become plain constants.
    constants = {tensor.name for tensor in graph.initializer}
    for value in [value for value in graph.input if value.name in constants]:
        graph.input.remove(value)
    inputs = [value.name for value in graph.input]
    if inputs != [roles.IMAGE]:
        raise ValueError(f"The ONNX converter named the inputs {inputs}; "
                         f"expected [{roles.IMAGE!r}].")
    if len(graph.output) != len(shapes):
        raise ValueError(f"The ONNX converter wrote {len(graph.output)} "
                         f"outputs; expected {len(shapes)} ({list(shapes)}).")
    for value, (name, shape) in zip(graph.output, shapes.items(),
                                    strict=True):
        dims = value.type.tensor_type.shape.dim
        known = [dim.dim_value if dim.HasField("dim_value") else None
                 for dim in dims]
        if len(known) != 1 + len(shape) or any(
                size not in (None, expected)
                for size, expected in zip(known[1:], shape, strict=True)):
            raise ValueError(
                f"The ONNX output {value.name!r} has shape {known}; "
                f"expected output {name!r} of shape {[None, *shape]}.")
        for dim, size in zip(dims[1:], shape, strict=True):
            dim.dim_value = size  # Some converters leave it unknown.
        if value.name != name:
            # An Identity gives the converter's tensor the served name.
            graph.node.append(onnx.helper.make_node(
                "Identity", [value.name], [name], name=f"serve_{name}"))
            value.name = name
    for value in (*graph.input, *graph.output):
        batch = value.type.tensor_type.shape.dim[0]
        if batch.HasField("dim_value"):
            raise ValueError(
                f"The ONNX converter fixed the batch size of {value.name!r} "
                f"to {batch.dim_value}; expected a dynamic batch.")
        batch.dim_param = BATCH
    onnx.checker.check_model(proto)
    onnx.save(proto, path, save_as_external_data=False)
