"""OpenVINO export of the inference graph, through Keras' own exporter
(`model.export(format="openvino")`): `model.xml` (the graph) and
`model.bin` (the float32 weights), for OpenVINO's runtime."""

import os
import warnings

from keras_caps import model_roles as roles
from keras_caps.export.serving_graph import output_shapes
from keras_caps.export.serving_graph import serving_graph
from keras_caps.inference.export_runners import OPENVINO_FILE


def write_openvino(model, folder, input_range):
    """Writes `model` (a serving model) to `folder/model.xml` and
    `folder/model.bin`.

    One input `image`, float32 `(batch, height, width, channels)` with a
    dynamic batch; the outputs named as in the SavedModel (`"length"`,
    `"reconstruction"`, ...), float32, NaN for non-finite images; [0, 1]
    inputs scaled to pixels for `input_range="unit"`.

    Raises:
        ValueError: the converted model does not have the expected input
            and outputs.
    """
    import openvino

    shapes = output_shapes(model)
    graph = serving_graph(model, input_range, shapes)
    converted = os.path.join(folder, ".converted.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph.export(converted, format="openvino", verbose=False)
    try:
        core = openvino.Core()
        served = _served_outputs(core.read_model(converted), shapes)
        # Weights as written: `save_model` would halve them to float16.
        openvino.serialize(served, os.path.join(folder, OPENVINO_FILE))
    finally:
        for name in (".converted.xml", ".converted.bin"):
            if os.path.exists(os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))


def _served_outputs(converted, shapes):
    """The OpenVINO model `converted` with only the served outputs, named
    after `shapes` (the converter can add outputs of inner layers after
    them), after checking the input and the outputs' shapes."""
    import openvino

    if len(converted.inputs) != 1:
        raise ValueError(f"The OpenVINO converter wrote "
                         f"{len(converted.inputs)} inputs; expected one, "
                         f"{roles.IMAGE!r}.")
    # PyTorch's tracer names the input `input`: the export's is `image`.
    converted.inputs[0].get_tensor().set_names({roles.IMAGE})
    results = list(converted.get_results())[:len(shapes)]
    for result, (name, shape) in zip(results, shapes.items(), strict=True):
        received = result.get_output_partial_shape(0)
        if (len(received) != 1 + len(shape) or not received[0].is_dynamic
                or [dimension.get_length() for dimension in received[1:]]
                != list(shape)):
            raise ValueError(
                f"The OpenVINO output for {name!r} has shape {received}; "
                f"expected {[None, *shape]}.")
        result.output(0).get_tensor().set_names({name})
    return openvino.Model(results, converted.get_parameters(),
                          f"{converted.get_friendly_name()}")
