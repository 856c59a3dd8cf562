import keras

from keras_caps.api_export import keras_caps_export
from keras_caps.ops import capsule_ops
from keras_caps.validation import cast_integer_input
from keras_caps.validation import check_number


@keras_caps_export("keras_caps.layers.Length")
class Length(keras.layers.Layer):
    """Length of each capsule, the class score of a capsule network.

    ```
    length[j] = sqrt(sum_z capsules[j, z]**2 + epsilon)
    ```

    Computed in float32 for half-precision inputs. In a mixed-precision
    model create it with `dtype="float32"` so the scores that feed the loss
    and the metrics stay float32.

    Args:
        epsilon: float. Added under the square root so the gradient at an
            all-zero capsule is finite. Defaults to `1e-7`, as the official
            code.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, num_capsules, capsule_dim)`.

    Returns:
        Tensor of shape `(batch, num_capsules)`.

    Example:

    >>> tuple(keras_caps.layers.Length()(np.ones((2, 10, 16))).shape)
    (2, 10)
    """

    def __init__(self, epsilon=1e-7, **kwargs):
        epsilon = check_number("epsilon", epsilon, minimum=0.0)
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.input_spec = keras.InputSpec(min_ndim=2)

    def call(self, inputs):
        inputs = cast_integer_input(inputs, self.compute_dtype)
        lengths = capsule_ops.capsule_length(inputs, epsilon=self.epsilon)
        return keras.ops.cast(lengths, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config
