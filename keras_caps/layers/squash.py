import keras

from keras_caps.api_export import keras_caps_export
from keras_caps.ops import capsule_ops
from keras_caps.ops.capsule_ops import SQUASH_VARIANTS
from keras_caps.validation import check_choice
from keras_caps.validation import check_number


@keras_caps_export("keras_caps.layers.Squash")
class Squash(keras.layers.Layer):
    """Squashes each capsule to a length in [0, 1), keeping its direction.

    ```
    efficient (Mazzia et al. 2021):  v = (1 - exp(-|s|)) * s / |s|
    sabour    (Sabour et al. 2017):  v = |s|**2 / (1 + |s|**2) * s / |s|
    ```

    Routers whose outputs are not squashed (`InvertedAttentionRouting` and
    `VectorRouting` end with a LayerNorm) need it before `Length` and the
    margin loss, whose class scores are lengths in [0, 1). See
    `keras_caps.ops.squash` for the numerics.

    Args:
        variant: str. `"efficient"` or `"sabour"`. Defaults to
            `"efficient"`.
        epsilon: float. Added under the square root of the norm. Defaults
            to `1e-7`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, ..., capsule_dim)`.

    Returns:
        Tensor of the shape of `inputs`.

    Example:

    >>> v = keras_caps.layers.Squash(variant="sabour")(np.array([[3.0, 4.0]]))
    >>> np.round(keras.ops.convert_to_numpy(v).astype("float64"), 4).tolist()
    [[0.5769, 0.7692]]

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    def __init__(self, variant="efficient", epsilon=1e-7, **kwargs):
        check_choice("variant", variant, SQUASH_VARIANTS)
        epsilon = check_number("epsilon", epsilon)
        if epsilon <= 0.0:
            raise ValueError(
                "Received an invalid value for `epsilon`, expected a "
                f"positive number. Received: epsilon={epsilon!r}")
        super().__init__(**kwargs)
        self.variant = variant
        self.epsilon = epsilon
        self.input_spec = keras.InputSpec(min_ndim=2)

    def call(self, inputs):
        # (batch, ..., capsule_dim) -> same shape, lengths in [0, 1)
        return capsule_ops.squash(inputs, variant=self.variant,
                                  epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"variant": self.variant, "epsilon": self.epsilon})
        return config
