import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.ops import capsule_ops
from keras_caps.validation import cast_integer_input
from keras_caps.validation import check_positive_int


@keras_caps_export("keras_caps.layers.Mask")
class Mask(keras.layers.Layer):
    """Masks all but the selected capsules and flattens them for a decoder.

    While training, and given labels, the capsules of the true classes are
    kept; otherwise (inference, or no labels) the longest capsules are kept.
    The result is flattened to `num_capsules * capsule_dim` values, the input
    of a reconstruction decoder. No gradient flows through the choice of
    mask.

    With `num_masks=k` the layer returns `k` masks at once, one object each,
    for inputs with several objects (MultiMNIST): the i-th keeps the capsule
    of the i-th label while training, or the i-th longest capsule, in
    descending order of length, at inference.

    Args:
        num_masks: int or None. `None` (default) returns a single mask of
            shape `(batch, num_capsules * capsule_dim)`; an integer `k`
            returns `(batch, k, num_capsules * capsule_dim)`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The capsules, a tensor of shape
            `(batch, num_capsules, capsule_dim)`, or a list
            `[capsules, labels]` with one-hot labels of shape
            `(batch, num_capsules)` (or `(batch, k, num_capsules)` when
            `num_masks=k`).
        training: bool. Labels are used only while training.

    Returns:
        Tensor of shape `(batch, num_capsules * capsule_dim)`, or
        `(batch, num_masks, num_capsules * capsule_dim)`.

    Example:

    >>> capsules = np.array([[[0.1, 0.0], [0.0, 0.5], [0.3, 0.0]]])
    >>> masked = keras_caps.layers.Mask()(capsules)
    >>> keras.ops.convert_to_numpy(masked).tolist()
    [[0.0, 0.0, 0.0, 0.5, 0.0, 0.0]]
    """

    def __init__(self, num_masks=None, **kwargs):
        if num_masks is not None:
            num_masks = check_positive_int("num_masks", num_masks)
        super().__init__(**kwargs)
        self.num_masks = num_masks

    def build(self, input_shape):
        self._split_shapes(input_shape)

    def call(self, inputs, training=None):
        if isinstance(inputs, (list, tuple)):
            capsules, labels = inputs
        else:
            capsules, labels = inputs, None
        capsules = cast_integer_input(capsules, self.compute_dtype)
        if labels is not None:
            labels = cast_integer_input(labels, self.compute_dtype)
        if training and labels is not None:
            masked = capsule_ops.mask_by_label(capsules, labels)
        else:
            masked = capsule_ops.mask_by_length(capsules, self.num_masks)
        num_values = capsules.shape[-2] * capsules.shape[-1]
        batch_size = ops.shape(capsules)[0]
        if self.num_masks is None:
            return ops.reshape(masked, (batch_size, num_values))
        return ops.reshape(masked, (batch_size, self.num_masks, num_values))

    def compute_output_shape(self, input_shape):
        capsule_shape, _ = self._split_shapes(input_shape)
        batch_size, num_capsules, capsule_dim = capsule_shape
        num_values = num_capsules * capsule_dim
        if self.num_masks is None:
            return (batch_size, num_values)
        return (batch_size, self.num_masks, num_values)

    def _split_shapes(self, input_shape):
        """Returns (capsule_shape, label_shape or None), checking both."""
        is_pair = (isinstance(input_shape, (list, tuple)) and input_shape
                   and isinstance(input_shape[0], (list, tuple)))
        if is_pair:
            if len(input_shape) != 2:
                raise ValueError(
                    "`Mask` takes the capsules or a list [capsules, labels]. "
                    f"Received: {len(input_shape)} inputs with shapes "
                    f"{input_shape}")
            capsule_shape, label_shape = map(tuple, input_shape)
        else:
            capsule_shape, label_shape = tuple(input_shape), None
        if len(capsule_shape) != 3 or None in capsule_shape[1:]:
            raise ValueError(
                "`Mask` expects capsules of shape (batch, num_capsules, "
                "capsule_dim) with known sizes. Received: "
                f"capsule shape {capsule_shape}")
        num_capsules = capsule_shape[1]
        if self.num_masks is not None and self.num_masks > num_capsules:
            raise ValueError(
                f"`Mask` has num_masks={self.num_masks} but there are only "
                f"{num_capsules} capsules. Received: capsule shape "
                f"{capsule_shape}")
        if label_shape is not None:
            if self.num_masks is None:
                expected = (capsule_shape[0], num_capsules)
            else:
                expected = (capsule_shape[0], self.num_masks, num_capsules)
            matches = len(label_shape) == len(expected) and all(
                got is None or want is None or got == want
                for got, want in zip(label_shape, expected))
            if not matches:
                raise ValueError(
                    "`Mask` expects one-hot labels of shape "
                    f"{expected} for capsules of shape {capsule_shape} and "
                    f"num_masks={self.num_masks}. Received: label shape "
                    f"{label_shape}")
        return capsule_shape, label_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_masks": self.num_masks})
        return config
