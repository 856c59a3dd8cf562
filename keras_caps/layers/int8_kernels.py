"""`Int8Kernels`: Keras' int8 quantization hooks for the kernels a capsule
layer multiplies its inputs by (the vote kernels)."""

import numpy as np
from keras import dtype_policies
from keras import ops

_INT8_RANGE = 127.0


class Int8Kernels:
    """Mixin of capsule layers: `quantize("int8")` stores the vote kernels
    in 8 bits.

    `model.quantize("int8")` calls each layer's `quantize`; Keras' own
    covers `Dense`, `EinsumDense` and `Embedding` only, so without this a
    capsule network keeps its capsule layers in float32. A layer lists its
    kernels in `int8_kernel_axes()`, each with the axes its inputs are
    contracted over; `quantize("int8")` replaces each kernel `W` by an int8
    tensor `q = round(W / s)`, clipped to [-127, 127], and a float32 scale
    `s = max |W| / 127` per output channel (the maximum over the contracted
    axes: one scale per vote column, as Keras' `Dense` does per unit). The
    layer reads its kernels through `kernel_value(name)`: the variable
    itself in float, `q * s` in float32 once quantized, so the routing maths
    (agreements, softmaxes, squash, EM statistics) runs in float32 as
    before. The dtype policy becomes `int8_from_<policy>`, which a `.keras`
    file records: loading builds the int8 variables again
    (`build_int8_kernels`, called at the end of `build`). Weights only:
    the activations stay float32 (weight-only quantization).

    Example:

    >>> import keras
    >>> import keras_caps
    >>> layer = keras_caps.layers.FCCaps(3, 4)
    >>> _ = layer(np.ones((2, 5, 8), "float32"))
    >>> layer.quantize("int8")
    >>> layer.kernel_int8.dtype, tuple(layer.kernel_scale.shape)
    ('int8', (3, 5, 1, 4))
    """

    def int8_kernel_axes(self):
        """`{kernel attribute: contracted axes}`: what `quantize("int8")`
        stores in 8 bits. None by default."""
        return {}

    def kernel_value(self, name):
        """The kernel `name`: its variable, or `q * s` in float32 once the
        layer is quantized to int8."""
        quantized = getattr(self, f"{name}_int8", None)
        if quantized is None:  # Float (or not swapped yet, in `build`).
            return getattr(self, name)
        return (ops.cast(quantized, "float32")
                * getattr(self, f"{name}_scale"))

    def float_dtype_policy(self):
        """The layer's dtype policy without its quantization: the policy
        of the sublayers it builds (a layer normalisation has no int8)."""
        name = self.dtype_policy.name
        return dtype_policies.get(name.split("_from_", 1)[-1]
                                  if self.quantization_mode else name)

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores the kernels of `int8_kernel_axes()` in int8 with
        per-output-channel scales (`mode="int8"` only; Keras' quantizer
        `config` is not used: the scales are the absolute maxima)."""
        del type_check, config  # Keras' arguments; the scheme is fixed.
        if mode != "int8" or not self.int8_kernel_axes():
            raise NotImplementedError(
                f"`{type(self).__name__}` quantizes to int8 only (its "
                f"kernels). Received: mode={mode!r}")
        kernel_axes = self.int8_kernel_axes()
        values = {name: ops.convert_to_numpy(getattr(self, name))
                  for name in kernel_axes}
        self.build_int8_kernels()
        for name, axes in kernel_axes.items():
            quantized, scale = int8_per_channel(values[name], axes)
            getattr(self, f"{name}_int8").assign(quantized)
            getattr(self, f"{name}_scale").assign(scale)
        self._is_quantized = True  # Before the policy, whose setter would
        # quantize again.
        if self.dtype_policy.quantization_mode is None:
            self.dtype_policy = dtype_policies.get(
                f"int8_from_{self.dtype_policy.name}")

    def build_int8_kernels(self):
        """Replaces each float kernel of `int8_kernel_axes()` by the int8
        variable `<name>_int8` and the float32 `<name>_scale`, appended
        after the layer's other variables (the same order whether the layer
        was quantized now or built from a quantized `.keras` file)."""
        for name, axes in self.int8_kernel_axes().items():
            shape = tuple(getattr(self, name).shape)
            delattr(self, name)  # Untracks the float variable.
            setattr(self, f"{name}_int8", self.add_weight(
                name=f"{name}_int8", shape=shape, dtype="int8",
                initializer="zeros", trainable=False))
            setattr(self, f"{name}_scale", self.add_weight(
                name=f"{name}_scale", shape=_scale_shape(shape, axes),
                dtype="float32", initializer="ones", trainable=False,
                autocast=False))

    def _int8_call(self, *args, **kwargs):
        # The layer's own call: it reads its kernels via `kernel_value`.
        return self.call(*args, **kwargs)


def int8_per_channel(kernel, axes):
    """`(q, s)`: `kernel` as int8 `q` and float32 scales `s`, one per
    output channel (the absolute maximum over `axes`, kept as size-1
    axes), with `q * s` closest to `kernel`.

    Example:

    >>> q, s = int8_per_channel(np.array([[1.0, -0.5], [0.25, 2.0]]), (0,))
    >>> q.tolist(), s.astype("float64").round(4).tolist()
    ([[127, -32], [32, 127]], [[0.0079, 0.0157]])
    """
    kernel = np.asarray(kernel, "float32")
    scale = np.max(np.abs(kernel), axis=tuple(axes), keepdims=True)
    scale = np.where(scale > 0, scale / _INT8_RANGE, 1.0).astype("float32")
    quantized = np.clip(np.round(kernel / scale), -_INT8_RANGE, _INT8_RANGE)
    return quantized.astype("int8"), scale


def _scale_shape(shape, axes):
    return tuple(1 if axis in axes else size
                 for axis, size in enumerate(shape))
