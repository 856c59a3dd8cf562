import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.int8_kernels import Int8Kernels
from keras_caps.layers.parent_quantized import QuantizedByParent
from keras_caps.layers.parent_quantized import quantize_holder
from keras_caps.ops import capsule_ops
from keras_caps.validation import cast_integer_input
from keras_caps.validation import check_choice
from keras_caps.validation import check_int_pair
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

CAPSULE_ORDERS = ("position_major", "type_major")
PADDINGS = ("valid", "same")


@keras_caps_export("keras_caps.layers.ConvPrimaryCaps")
class ConvPrimaryCaps(Int8Kernels, keras.layers.Layer):
    """Primary capsules of the original CapsNet: a full convolution, squashed.

    A regular convolution with `num_types * capsule_dim` filters and no
    bias of its own; at every output position its channels are grouped
    into `num_types` capsules (channel `t * capsule_dim + a` is atom `a` of
    type `t`), scaled, offset by a per-type bias and squashed.

    ```
    P[b, h, w, t * D + a] = conv2d(X, kernel, strides)[b, h, w, t * D + a]
    s[b, (h, w, t), a]    = scale * P[b, h, w, t * D + a] + bias[t, a]
    capsules             = squash(s)
    ```

    `PrimaryCaps` (Efficient-CapsNet) convolves each channel on its own
    (depthwise); the original architecture needs every filter to see all
    channels, hence this layer. Both reuse `keras_caps.ops.squash`.

    With the defaults this is the Keras port's primary capsule (a biased
    `Conv2D`, a reshape in `(h, w, type)` order, a squash): the per-type
    bias and a convolution bias differ only in name. The official code
    routes its primary votes once with zero logits, which multiplies them
    by `1 / num_types` before a bias initialised to 0.1; reproduce it with
    `scale=1 / 32` (`1 / 33` with leaky routing),
    `bias_initializer=Constant(0.1)`,
    `kernel_initializer=TruncatedNormal(stddev=0.1)` and
    `capsule_order="type_major"`.

    Args:
        num_types: int. Number of capsule types (channels of capsules).
        capsule_dim: int. Dimension of each capsule.
        kernel_size: int or tuple of 2 ints. Convolution window.
        strides: int or tuple of 2 ints. Defaults to `1`.
        padding: str. `"valid"` or `"same"`. Defaults to `"valid"`.
        scale: float. Multiplies the convolution output before the bias.
            Defaults to `1.0`.
        capsule_order: str. `"position_major"` orders the capsules
            `(h, w, type)`, as the Keras port; `"type_major"` orders them
            `(type, h, w)`, as the official code. Defaults to
            `"position_major"`.
        squash: str. `"sabour"` or `"efficient"`, see
            `keras_caps.ops.squash`. Defaults to `"sabour"`.
        kernel_initializer: Initializer for the convolution kernel.
            Defaults to `"glorot_uniform"`.
        bias_initializer: Initializer for the `(num_types, capsule_dim)`
            bias. Defaults to `"zeros"`.
        kernel_regularizer: Regularizer for the convolution kernel.
            Defaults to `None`.
        bias_regularizer: Regularizer for the bias. Defaults to `None`.
        kernel_constraint: Constraint for the convolution kernel. Defaults
            to `None`.
        bias_constraint: Constraint for the bias. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, height, width, channels)`
            (channels last).

    Returns:
        Tensor of shape `(batch, out_height * out_width * num_types,
        capsule_dim)`.

    Example:

    >>> layer = keras_caps.layers.ConvPrimaryCaps(
    ...     num_types=4, capsule_dim=8, kernel_size=3, strides=2)
    >>> tuple(layer(np.zeros((2, 7, 7, 16))).shape)
    (2, 36, 8)

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    def __init__(self, num_types, capsule_dim, kernel_size, strides=1,
                 padding="valid", scale=1.0, capsule_order="position_major",
                 squash="sabour", kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        num_types = check_positive_int("num_types", num_types)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        kernel_size = check_int_pair("kernel_size", kernel_size)
        strides = check_int_pair("strides", strides)
        check_choice("padding", padding, PADDINGS)
        scale = check_number("scale", scale)
        check_choice("capsule_order", capsule_order, CAPSULE_ORDERS)
        check_choice("squash", squash, capsule_ops.SQUASH_VARIANTS)
        super().__init__(**kwargs)
        self.num_types = num_types
        self.capsule_dim = capsule_dim
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
        self.scale = scale
        self.capsule_order = capsule_order
        self.squash = squash
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.input_spec = keras.InputSpec(ndim=4)

    def build(self, input_shape):
        self._check_input_shape(input_shape)
        self.conv = _CapsuleConvolution(
            filters=self.num_types * self.capsule_dim,
            kernel_size=self.kernel_size,
            strides=self.strides,
            padding=self.padding,
            use_bias=False,
            kernel_initializer=self.kernel_initializer,
            kernel_regularizer=self.kernel_regularizer,
            kernel_constraint=self.kernel_constraint,
            dtype=self.dtype_policy,
            name="conv",
        )
        self.conv.build(input_shape)
        self.bias = self.add_weight(
            name="bias", shape=(self.num_types, self.capsule_dim),
            initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint)

    def call(self, inputs):
        inputs = cast_integer_input(inputs, self.compute_dtype)
        features = self.conv(inputs)  # (batch, h', w', types * dim)
        shape = ops.shape(features)
        # (batch, h', w', types, dim)
        capsules = ops.reshape(features, (shape[0], shape[1], shape[2],
                                          self.num_types, self.capsule_dim))
        if self.capsule_order == "type_major":
            capsules = ops.transpose(capsules, (0, 3, 1, 2, 4))
        if self.scale != 1.0:
            capsules = capsules * self.scale
        if self.capsule_order == "type_major":
            bias = ops.reshape(self.bias,
                               (self.num_types, 1, 1, self.capsule_dim))
        else:
            bias = self.bias
        capsules = capsules + ops.cast(bias, capsules.dtype)
        capsules = ops.reshape(capsules, (shape[0], -1, self.capsule_dim))
        return capsule_ops.squash(capsules, variant=self.squash)

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores the convolution's kernel in int8 with one scale per
        filter (`Int8Kernels`); `keras_caps.inference.quantize_int8` calls
        it (Keras' `model.quantize` reaches only layers without
        sublayers)."""
        del type_check, config
        quantize_holder(self, self.conv, mode)

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        height, width = input_shape[1:3]
        out_height = self._output_size(height, 0)
        out_width = self._output_size(width, 1)
        if out_height is None or out_width is None:
            num_capsules = None
        else:
            num_capsules = out_height * out_width * self.num_types
        return (input_shape[0], num_capsules, self.capsule_dim)

    def _output_size(self, size, axis):
        if size is None:
            return None
        if self.padding == "same":
            return -(-size // self.strides[axis])
        return (size - self.kernel_size[axis]) // self.strides[axis] + 1

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 4:
            raise ValueError(
                "`ConvPrimaryCaps` expects a 4-D input (batch, height, "
                f"width, channels). Received: input_shape={input_shape}")
        if input_shape[-1] is None:
            raise ValueError(
                "`ConvPrimaryCaps` needs a known number of channels. "
                f"Received: input_shape={input_shape}")
        if self.padding == "same":
            return
        for size, kernel, axis in zip(input_shape[1:3], self.kernel_size,
                                      ("height", "width")):
            if size is not None and size < kernel:
                raise ValueError(
                    f"`ConvPrimaryCaps` has a kernel_size of "
                    f"{self.kernel_size}, larger than the feature map's "
                    f"{axis} {size}. Received: input_shape={input_shape}")

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_types": self.num_types,
            "capsule_dim": self.capsule_dim,
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "padding": self.padding,
            "scale": self.scale,
            "capsule_order": self.capsule_order,
            "squash": self.squash,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer":
                keras.initializers.serialize(self.bias_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ("kernel", "bias")))
        return config


class _CapsuleConvolution(QuantizedByParent, keras.layers.Conv2D):
    """`ConvPrimaryCaps`' convolution (no bias: the capsules have theirs),
    whose kernel its `ConvPrimaryCaps` can store in int8 (one scale per
    filter, over the window and the input channels)."""

    def int8_kernel_axes(self):
        # (kh, kw, in, filters): each filter sums its window and inputs.
        # Keras' `Conv2D.kernel` is a property over `_kernel`.
        return {"_kernel": (0, 1, 2)}

    def _int8_call(self, inputs):
        return ops.conv(
            inputs, ops.cast(self.kernel_value("_kernel"), inputs.dtype),
            strides=self.strides, padding=self.padding,
            dilation_rate=self.dilation_rate, data_format=self.data_format)
