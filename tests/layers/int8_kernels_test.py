"""int8 vote kernels (`Int8Kernels`), for every router.

Each router of `router_contract_test`'s cases is quantized with
`quantize("int8")`: its vote kernel must become the int8 tensor and the
per-output-channel scales of a NumPy reference (`_reference_int8`: the
absolute maximum over the contracted axes / 127, rounded and clipped),
and its outputs must equal the float layer's outputs with that
dequantized kernel put in (the routing maths unchanged, in float32).
A quantized model round-trips through a `.keras` file under safe mode.
"""

import os
import warnings

import keras
import numpy as np
import pytest

from keras_caps import layers
from keras_caps.inference import quantize_int8
from keras_caps.layers.int8_kernels import Int8Kernels
from tests.layers import router_contract_test as contract

# One of each form (the others share their kernel code).
CASES = ["AttentionRouting", "AttentionRouting_heads_children",
         "ConvMatrixCaps", "ConvSelfRouting", "DynamicRouting", "EMRouting",
         "EMRouting_vectors", "FCCaps", "HybridRouting_concat",
         "InvertedAttentionRouting", "InvertedAttentionRouting_conv",
         "SelfRouting", "VectorRouting"]


def _reference_int8(kernel, axes):
    """Symmetric per-channel int8 of `kernel`, written from its
    definition: s = max|W| / 127 over `axes` (1 where all zero),
    q = clip(round(W / s), -127, 127)."""
    kernel = np.asarray(kernel, "float64")
    scale = np.abs(kernel).max(axis=axes, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.rint(kernel / scale), -127, 127), scale


def _outputs(layer, inputs):
    return [keras.ops.convert_to_numpy(value)
            for value in keras.tree.flatten(layer(inputs))]


def test_every_router_quantizes_its_vote_kernel():
    assert sorted(set(CASES) - set(contract.router_cases())) == []
    for name in contract.concrete_routers():  # Every router has one.
        assert any(case.split("_")[0] == name for case in CASES), name


@pytest.mark.parametrize("case", CASES)
def test_quantized_router_matches_the_numpy_reference(case):
    layer, inputs = contract._make(case)
    axes = layer.int8_kernel_axes()
    floats = {name: keras.ops.convert_to_numpy(getattr(layer, name))
              for name in axes}
    references = {name: _reference_int8(floats[name], tuple(axes[name]))
                  for name in axes}
    for name, (quantized, scale) in references.items():
        getattr(layer, name).assign((quantized * scale).astype("float32"))
    expected = _outputs(layer, inputs)  # Float maths, int8 weights.
    for name, value in floats.items():
        getattr(layer, name).assign(value)
    layer.quantize("int8")
    assert layer.quantization_mode == "int8"
    assert layer.dtype_policy.name == "int8_from_float32"
    for name, (quantized, scale) in references.items():
        assert not hasattr(layer, name)  # The float kernel is gone.
        stored = getattr(layer, f"{name}_int8")
        assert stored.dtype == "int8"
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(stored), quantized)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(
            getattr(layer, f"{name}_scale")), scale, rtol=1e-6)
    assert all(not variable.trainable or variable.dtype != "int8"
               for variable in layer.variables)
    for value, reference in zip(_outputs(layer, inputs), expected,
                                strict=True):
        np.testing.assert_allclose(value, reference, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("case", ["FCCaps", "ConvMatrixCaps",
                                  "InvertedAttentionRouting_conv"])
def test_a_quantized_model_round_trips_in_safe_mode(case, tmp_path):
    layer, inputs = contract._make(case)
    symbolic = keras.Input(inputs.shape[1:])
    model = keras.Model(symbolic, layer(symbolic))
    # Keras' `model.quantize` skips InvertedAttentionRouting (it holds a
    # layer normalisation): `quantize_int8` does not.
    assert quantize_int8(model) == [layer.name]
    expected = _outputs(model, inputs)
    path = str(tmp_path / "quantized.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    quantized = [other for other in loaded.layers
                 if isinstance(other, Int8Kernels)]
    assert [other.quantization_mode for other in quantized] == ["int8"]
    for value, reference in zip(_outputs(loaded, inputs), expected,
                                strict=True):
        np.testing.assert_allclose(value, reference, atol=1e-6)
    # 1 byte per vote weight instead of 4 (the scales are few).
    name = next(iter(quantized[0].int8_kernel_axes()))
    assert getattr(quantized[0], f"{name}_int8").dtype == "int8"
    assert os.path.getsize(path) > 0


def test_other_modes_are_left_to_keras_warning():
    layer, _ = contract._make("FCCaps")
    with pytest.raises(NotImplementedError, match="int8 only.*'int4'"):
        layer.quantize("int4")
    assert layer.quantization_mode is None


def _primary_case(layer, input_shape, seed):
    """`(model, inputs, kernel variable)` of a model holding `layer`."""
    keras.utils.set_random_seed(seed)
    inputs = np.random.default_rng(seed).normal(
        size=input_shape).astype("float32")
    symbolic = keras.Input(inputs.shape[1:])
    return keras.Model(symbolic, layer(symbolic)), inputs


def _with_reference_kernel(model, inputs, variable, axes):
    """The model's outputs with `variable` replaced by its NumPy int8
    reference, dequantized (the variable is restored); and that
    reference's int8 values."""
    kernel = keras.ops.convert_to_numpy(variable)
    quantized, scale = _reference_int8(kernel, axes)
    variable.assign((quantized * scale).astype("float32"))
    expected = _outputs(model, inputs)
    variable.assign(kernel)
    return expected, quantized


def _check_quantized_and_reloaded(model, inputs, expected, path):
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    for candidate in (model, loaded):
        for value, reference in zip(_outputs(candidate, inputs), expected,
                                    strict=True):
            np.testing.assert_allclose(value, reference, atol=2e-5)


def test_primary_matrix_caps_quantizes_its_kernel(tmp_path):
    primary = layers.PrimaryMatrixCaps(2)
    model, inputs = _primary_case(primary, (2, 3, 3, 6), 7)
    expected, quantized = _with_reference_kernel(model, inputs,
                                                 primary.kernel, (0,))
    assert quantize_int8(model) == [primary.name]
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(primary.kernel_int8), quantized)
    _check_quantized_and_reloaded(model, inputs, expected,
                                  str(tmp_path / "primary_matrix.keras"))


def test_conv_primary_caps_quantizes_its_convolution(tmp_path):
    primary = layers.ConvPrimaryCaps(2, 4, kernel_size=3, strides=2)
    model, inputs = _primary_case(primary, (2, 5, 5, 3), 8)
    convolution = primary.conv
    expected, quantized = _with_reference_kernel(
        model, inputs, convolution.kernel, (0, 1, 2))
    assert quantize_int8(model) == [primary.name, convolution.name]
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(convolution._kernel_int8), quantized)
    _check_quantized_and_reloaded(model, inputs, expected,
                                  str(tmp_path / "conv_primary.keras"))


@pytest.mark.parametrize("kernel_size", [4, 2])  # Whole map; convolution.
def test_primary_caps_quantizes_its_depthwise_kernel(kernel_size, tmp_path):
    primary = layers.PrimaryCaps(4 if kernel_size == 4 else 36, 2,
                                 kernel_size)
    model, inputs = _primary_case(primary, (2, 4, 4, 8), 6)
    convolution = primary.depthwise_conv
    expected, quantized = _with_reference_kernel(
        model, inputs, convolution.kernel, (0, 1))
    # Keras' own `model.quantize` leaves it float, saying what to use.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.quantize("int8")
    assert any("use keras_caps.inference.quantize_int8" in str(w.message)
               for w in caught)
    assert primary.quantization_mode is None
    assert quantize_int8(model) == [primary.name, convolution.name]
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(convolution.kernel_int8), quantized)
    _check_quantized_and_reloaded(model, inputs, expected,
                                  str(tmp_path / "primary.keras"))
