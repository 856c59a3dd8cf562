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
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints


@keras_caps_export("keras_caps.layers.PrimaryCaps")
class PrimaryCaps(Int8Kernels, keras.layers.Layer):
    """Primary capsules of Efficient-CapsNet: a depthwise convolution, squashed.

    One `kernel_size` filter per channel slides over the feature map with
    `"valid"` padding. The result is reshaped row-major into `num_capsules`
    capsules of `capsule_dim` values (with a 1x1 output, capsule `n` holds
    channels `n * capsule_dim ... (n + 1) * capsule_dim - 1`) and squashed.

    ```
    P[b, h, w, f] = sum_{p, q} X[b, s*h + p, s*w + q, f] * k[p, q, f] + bias[f]
    capsules = squash(reshape(P, (batch, num_capsules, capsule_dim)))
    ```

    The official code builds this as `Conv2D(F, K, groups=F)`; a depthwise
    convolution has the same `K*K*F + F` parameters and initial
    distribution. When the window covers the whole map (Efficient-CapsNet's
    9x9 window on a 9x9 map) the layer computes the single output position
    as a per-channel dot product (products summed over the window), with
    the same result. Official kernels of shape `(K, K, 1, F)` load after a
    reshape to `(K, K, F, 1)`.

    Args:
        num_capsules: int. Number of primary capsules.
        capsule_dim: int. Dimension of each capsule.
        kernel_size: int or tuple of 2 ints. Size of the depthwise window.
        strides: int or tuple of 2 ints. Defaults to `1`.
        squash: str. `"efficient"` or `"sabour"`, see
            `keras_caps.ops.squash`. Defaults to `"efficient"`.
        kernel_initializer: Initializer for the depthwise kernel. Defaults
            to `"glorot_uniform"`, as the official grouped convolution.
        bias_initializer: Initializer for the bias. Defaults to `"zeros"`.
        kernel_regularizer: Regularizer for the depthwise kernel. Defaults
            to `None`.
        bias_regularizer: Regularizer for the bias. Defaults to `None`.
        kernel_constraint: Constraint for the depthwise kernel. Defaults
            to `None`.
        bias_constraint: Constraint for the bias. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, height, width, channels)`
            (channels last), where the convolution output holds exactly
            `num_capsules * capsule_dim` values per example.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`.

    Example:

    >>> layer = keras_caps.layers.PrimaryCaps(
    ...     num_capsules=4, capsule_dim=4, kernel_size=3)
    >>> tuple(layer(np.zeros((2, 3, 3, 16))).shape)
    (2, 4, 4)

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """

    def __init__(self, num_capsules, capsule_dim, kernel_size, strides=1,
                 squash="efficient", kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        kernel_size = check_int_pair("kernel_size", kernel_size)
        strides = check_int_pair("strides", strides)
        check_choice("squash", squash, capsule_ops.SQUASH_VARIANTS)
        super().__init__(**kwargs)
        self.num_capsules = num_capsules
        self.capsule_dim = capsule_dim
        self.kernel_size = kernel_size
        self.strides = strides
        self.squash = squash
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.input_spec = keras.InputSpec(ndim=4)

    def build(self, input_shape):
        self._check_input_shape(input_shape)
        self.depthwise_conv = _PrimaryConvolution(
            kernel_size=self.kernel_size,
            strides=self.strides,
            padding="valid",
            depth_multiplier=1,
            use_bias=True,
            depthwise_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            depthwise_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            depthwise_constraint=self.kernel_constraint,
            bias_constraint=self.bias_constraint,
            dtype=self.dtype_policy,
            name="depthwise_conv",
        )
        self.depthwise_conv.build(input_shape)
        # When the window covers the whole map (Efficient-CapsNet), the
        # convolution has one output position: a per-channel dot product.
        self._covers_input = tuple(input_shape[1:3]) == self.kernel_size

    def call(self, inputs):
        inputs = cast_integer_input(inputs, self.compute_dtype)
        if self._covers_input:
            features = self._whole_window(inputs)  # (batch, channels)
        else:
            features = self.depthwise_conv(inputs)  # (batch, h', w', channels)
        batch_size = ops.shape(features)[0]
        capsules = ops.reshape(
            features, (batch_size, self.num_capsules, self.capsule_dim))
        return capsule_ops.squash(capsules, variant=self.squash)

    def _whole_window(self, inputs):
        """The single output position of a window covering the whole map.

        A per-channel dot product over the `height * width` positions,
        written as a broadcast product summed over the positions: on CPUs
        it is several times faster than both the convolution op (whose
        gradient is slow) and an einsum (which transposes the channels to
        a batch axis), forward and backward. The sum runs in float32 for
        half-precision inputs.
        """
        height, width, channels = inputs.shape[1:]
        # (batch, h * w, channels)
        inputs = ops.reshape(inputs, (-1, height * width, channels))
        kernel = ops.reshape(ops.cast(
            self.depthwise_conv.kernel_value("kernel"), inputs.dtype),
                             (height * width, channels))  # (h * w, channels)
        features = ops.sum(capsule_ops.at_least_float32(inputs * kernel),
                           axis=1)  # (batch, channels)
        return ops.cast(features, inputs.dtype) + ops.cast(
            self.depthwise_conv.bias, inputs.dtype)

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores the depthwise kernel in int8 with one scale per channel
        (`Int8Kernels`); `keras_caps.inference.quantize_int8` calls it
        (Keras' `model.quantize` reaches only layers without sublayers)."""
        del type_check, config
        quantize_holder(self, self.depthwise_conv, mode)

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], self.num_capsules, self.capsule_dim)

    def _check_input_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "`PrimaryCaps` expects a 4-D input (batch, height, width, "
                f"channels). Received: input_shape={tuple(input_shape)}")
        height, width, channels = input_shape[1:]
        if channels is None:
            raise ValueError(
                "`PrimaryCaps` needs a known number of channels. Received: "
                f"input_shape={tuple(input_shape)}")
        for size, kernel, axis in zip((height, width), self.kernel_size,
                                      ("height", "width")):
            if size is not None and size < kernel:
                raise ValueError(
                    f"`PrimaryCaps` has a kernel_size of {self.kernel_size}, "
                    f"larger than the feature map's {axis} {size}. Received: "
                    f"input_shape={tuple(input_shape)}")
        if height is None or width is None:
            out_height = out_width = None
            out_values = None
        else:
            out_height = (height - self.kernel_size[0]) // self.strides[0] + 1
            out_width = (width - self.kernel_size[1]) // self.strides[1] + 1
            out_values = out_height * out_width * channels
        needed = self.num_capsules * self.capsule_dim
        if out_values is not None and out_values != needed:
            raise ValueError(
                "`PrimaryCaps` needs the depthwise output to hold "
                f"num_capsules * capsule_dim = {needed} values. Received: "
                f"input_shape={tuple(input_shape)}, which gives "
                f"{out_height}x{out_width}x{channels} = {out_values}.")

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_capsules": self.num_capsules,
            "capsule_dim": self.capsule_dim,
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "squash": self.squash,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer":
                keras.initializers.serialize(self.bias_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ("kernel", "bias")))
        return config


class _PrimaryConvolution(QuantizedByParent, keras.layers.DepthwiseConv2D):
    """`PrimaryCaps`' depthwise convolution, whose kernel its `PrimaryCaps`
    can store in int8 (one scale per channel, over the window)."""

    def int8_kernel_axes(self):
        # (kh, kw, channels, multiplier): each channel sums its window.
        return {"kernel": (0, 1)}

    def _int8_call(self, inputs):
        outputs = ops.depthwise_conv(
            inputs, ops.cast(self.kernel_value("kernel"), inputs.dtype),
            strides=self.strides, padding=self.padding,
            dilation_rate=self.dilation_rate, data_format=self.data_format)
        return _biased_and_activated(self, outputs)


def _biased_and_activated(convolution, outputs):
    """`outputs` of a Keras convolution with its bias and activation."""
    if convolution.use_bias:
        shape = ((1,) * (convolution.rank + 1) + (-1,)
                 if convolution.data_format == "channels_last"
                 else (1, -1) + (1,) * convolution.rank)
        outputs = outputs + ops.reshape(
            ops.cast(convolution.bias, outputs.dtype), shape)
    if convolution.activation is not None:
        outputs = convolution.activation(outputs)
    return outputs
