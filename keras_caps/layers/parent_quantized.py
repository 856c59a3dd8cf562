"""`QuantizedByParent`: a convolution inside a capsule layer whose kernel
the capsule layer stores in int8 (`PrimaryCaps`, `ConvPrimaryCaps`)."""

import keras
from keras import dtype_policies

from keras_caps.layers.int8_kernels import Int8Kernels


class QuantizedByParent(Int8Kernels):
    """Mixin of a Keras convolution held by a capsule layer: its kernel is
    stored in int8 when the capsule layer is quantized, never alone.

    Quantized alone (by `model.quantize`, which reaches only layers without
    sublayers), the `.keras` file would record a float capsule layer around
    int8 weights, which could not load: that `quantize` is refused with a
    pointer to `keras_caps.inference.quantize_int8`, which quantizes the
    capsule layer (`quantize_with_holder`). A layer built with an int8
    policy (its holder's, loaded from a file) builds the int8 variables.
    The class defines `int8_kernel_axes` and `_int8_call` (the convolution
    with `kernel_value("kernel")`).

    Example:

    ```python
    class HeldConv2D(QuantizedByParent, keras.layers.Conv2D):
        def int8_kernel_axes(self):
            return {"kernel": (0, 1, 2)}
    ```
    """

    def build(self, input_shape):
        super().build(input_shape)
        if self.quantization_mode == "int8":  # Its holder is quantized.
            self.build_int8_kernels()

    def quantize(self, mode=None, type_check=True, config=None):
        if not getattr(self, "_quantizing_with_holder", False):
            raise NotImplementedError(
                f"The convolution {self.name!r} of a capsule layer is "
                "quantized with the capsule layer: use keras_caps.inference."
                "quantize_int8(model) instead of model.quantize('int8').")
        super().quantize(mode, type_check, config)

    def save_own_variables(self, store):
        # Keras' convolutions save a kernel merged with LoRA; an int8 one
        # saves its variables as they are (Keras' plain layer order).
        if self.quantization_mode == "int8":
            keras.layers.Layer.save_own_variables(self, store)
        else:
            super().save_own_variables(store)

    def load_own_variables(self, store):
        if self.quantization_mode == "int8":
            keras.layers.Layer.load_own_variables(self, store)
        else:
            super().load_own_variables(store)

    def quantize_with_holder(self, mode):
        """`quantize(mode)`, as the capsule layer holding it asks."""
        self._quantizing_with_holder = True
        try:
            self.quantize(mode)
        finally:
            self._quantizing_with_holder = False


def quantize_holder(holder, convolution, mode):
    """Quantizes `convolution` (a `QuantizedByParent`) and gives `holder`,
    the capsule layer holding it, the int8 policy a `.keras` file records.

    Raises:
        NotImplementedError: `mode` is not `"int8"`.
    """
    if mode != "int8":
        raise NotImplementedError(
            f"`{type(holder).__name__}` quantizes to int8 only (its "
            f"convolution's kernel). Received: mode={mode!r}")
    convolution.quantize_with_holder(mode)
    holder._is_quantized = True  # Before the policy (its setter).
    holder.dtype_policy = dtype_policies.get(
        f"int8_from_{holder.dtype_policy.name}")
