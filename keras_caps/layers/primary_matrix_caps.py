import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.int8_kernels import Int8Kernels
from keras_caps.ops import em_routing as em_ops
from keras_caps.validation import cast_integer_input
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints


@keras_caps_export("keras_caps.layers.PrimaryMatrixCaps")
class PrimaryMatrixCaps(Int8Kernels, keras.layers.Layer):
    """Primary matrix capsules (Hinton, Sabour & Frosst, ICLR 2018, §5).

    A 1x1 convolution of the feature map gives, at every position and for
    each of the `num_capsules` capsule types, the 16 entries of a 4x4 pose
    matrix (linear) and the logit of an activation (logistic):

    ```
    z[b, h, w, t, k] = sum_c X[b, h, w, c] * kernel[c, 17 t + k]
                       + bias[17 t + k]                  # k = 0..16
    pose       = z[..., :16]                             # (4x4, row-major)
    activation = logistic(z[..., 16])
    ```

    The output is a matrix capsule tensor `(batch, height, width,
    num_capsules, 17)` (see `keras_caps.ops.split_matrix_capsules`), the
    input of `ConvMatrixCaps` and `EMRouting`. Parameters: `channels *
    num_capsules * 17 + num_capsules * 17` (17,952 for the paper's 32
    channels and B = 32 types).

    Args:
        num_capsules: int. Number of capsule types `B` per position.
        kernel_initializer: Initializer for the `(channels, num_capsules *
            17)` kernel (the 1x1 convolution's, fans as a `Conv2D`'s).
            Defaults to `"glorot_uniform"`.
        bias_initializer: Initializer for the `(num_capsules * 17,)` bias.
            Defaults to `"zeros"`.
        kernel_regularizer: Regularizer for the kernel. Defaults to `None`.
        bias_regularizer: Regularizer for the bias. Defaults to `None`.
        kernel_constraint: Constraint for the kernel. Defaults to `None`.
        bias_constraint: Constraint for the bias. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, height, width, channels)`.

    Returns:
        Tensor of shape `(batch, height, width, num_capsules, 17)`.

    Example:

    >>> layer = keras_caps.layers.PrimaryMatrixCaps(num_capsules=4)
    >>> tuple(layer(np.zeros((2, 5, 5, 8))).shape)
    (2, 5, 5, 4, 17)

    Reference:
    - [Hinton et al., 2018](https://openreview.net/forum?id=HJWLfGWRb)
    """

    def __init__(self, num_capsules, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        super().__init__(**kwargs)
        self.num_capsules = num_capsules
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.input_spec = keras.InputSpec(ndim=4)

    def build(self, input_shape):
        self._check_input_shape(input_shape)
        units = self.num_capsules * em_ops.MATRIX_CAPSULE_SIZE
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], units),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self.bias = self.add_weight(
            name="bias", shape=(units,), initializer=self.bias_initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint)
        if self.quantization_mode == "int8":  # A quantized `.keras` file.
            self.build_int8_kernels()

    def int8_kernel_axes(self):
        """The 1x1 convolution's kernel `(c, B * 17)`, its input channels
        contracted, for `quantize("int8")` (see `Int8Kernels`)."""
        return {"kernel": (0,)}

    def call(self, inputs):
        inputs = cast_integer_input(inputs, self.compute_dtype)
        # (b, h, w, c) x (c, B * 17) -> (b, h, w, B * 17)
        features = ops.einsum("bhwc,ck->bhwk", inputs,
                              ops.cast(self.kernel_value("kernel"),
                                       inputs.dtype))
        features = features + self.bias
        shape = ops.shape(features)
        # (b, h, w, B, 17)
        features = ops.reshape(features, (
            shape[0], shape[1], shape[2], self.num_capsules,
            em_ops.MATRIX_CAPSULE_SIZE))
        poses, logits = em_ops.split_matrix_capsules(features)
        return em_ops.join_matrix_capsules(poses, ops.sigmoid(logits))

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (*tuple(input_shape[:3]), self.num_capsules,
                em_ops.MATRIX_CAPSULE_SIZE)

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "`PrimaryMatrixCaps` expects a 4-D input (batch, height, "
                "width, channels) with a known number of channels. "
                f"Received: input_shape={input_shape}")

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_capsules": self.num_capsules,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer":
                keras.initializers.serialize(self.bias_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ("kernel", "bias")))
        return config
