"""Capsule operations: norms, squash functions, votes and masks.

Everything here uses `keras.ops` only, so it runs on every Keras backend.
Norms are computed in float32 even for float16/bfloat16 inputs and cast
back, so the epsilon under the square root never underflows and an
all-zero capsule gives finite values and finite gradients.
"""

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_choice
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int

SQUASH_VARIANTS = ("efficient", "sabour")
_HALF_PRECISION = ("float16", "bfloat16")


@keras_caps_export("keras_caps.ops.at_least_float32")
def at_least_float32(x):
    """`x` cast to float32 when it is float16 or bfloat16, else unchanged.

    For the sums that overflow or lose precision in half precision (norms,
    agreements, softmax logits); cast the result back to the compute dtype.

    Example:

    >>> x = keras.ops.ones((2,), dtype="float16")
    >>> y = keras_caps.ops.at_least_float32(x)
    >>> keras.backend.standardize_dtype(y.dtype)
    'float32'
    """
    x = ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(x.dtype) in _HALF_PRECISION:
        return ops.cast(x, "float32")
    return x


@keras_caps_export("keras_caps.ops.capsule_votes")
def capsule_votes(children, kernel):
    """The votes `W_ij u_i` of every child for every parent, parent-major.

    `votes[b, j, i] = u[b, i] @ W[i, :, j]` (Sabour et al., 2017, Eq. 2):
    one `(input_dim, dim)` matrix per child and parent. Laid out `(batch,
    parents, children, dim)`, where a routing contraction over the
    children is a batched matrix product over `(batch, parents)`.

    One batched matrix product over the children, `(i, b, d) @ (i, d,
    j z)`, and a transpose: on TensorFlow's CPU kernels its backward pass
    is several times faster than that of the same `einsum`.

    Args:
        children: `(batch, children, input_dim)`.
        kernel: `(children, input_dim, parents, dim)`.

    Returns:
        `(batch, parents, children, dim)`, in the children's dtype.

    Example:

    >>> children = np.ones((2, 3, 4), "float32")
    >>> kernel = np.ones((3, 4, 5, 6), "float32")
    >>> votes = keras_caps.ops.capsule_votes(children, kernel)
    >>> tuple(votes.shape), float(votes[0, 0, 0, 0])
    ((2, 5, 3, 6), 4.0)
    """
    children = ops.convert_to_tensor(children)
    kernel = ops.cast(kernel, children.dtype)
    if len(kernel.shape) != 4:
        raise ValueError(
            "`capsule_votes` expects a kernel (children, input_dim, "
            "parents, dim). Received: kernel.shape="
            f"{tuple(kernel.shape)}")
    num_children, input_dim, num_parents, dim = tuple(kernel.shape)
    if len(children.shape) != 3 or any(
            size not in (None, expected) for size, expected in zip(
                children.shape[1:], (num_children, input_dim))):
        raise ValueError(
            "`capsule_votes` expects children (batch, "
            f"{num_children}, {input_dim}) for a kernel of shape "
            f"{tuple(kernel.shape)}. Received: children.shape="
            f"{tuple(children.shape)}")
    flat_kernel = ops.reshape(kernel, (num_children, input_dim,
                                       num_parents * dim))
    # (i, b, d) @ (i, d, j z) -> (i, b, j, z) -> (b, j, i, z)
    votes = ops.matmul(ops.transpose(children, (1, 0, 2)), flat_kernel)
    votes = ops.reshape(votes, (num_children, -1, num_parents, dim))
    return ops.transpose(votes, (1, 2, 0, 3))


def _check_epsilon(epsilon):
    return check_number("epsilon", epsilon, minimum=0.0)


def _norm(x, axis, keepdims, epsilon):
    """`sqrt(sum(x**2) + epsilon)` that neither overflows nor underflows.

    Vectors with an entry above 1 are divided by their largest magnitude
    `m` first, `m * sqrt(sum((x / m)**2) + epsilon / m**2)`, so squares of
    huge values do not overflow. `m` is a constant for autodiff, which is
    exact because the expression equals the plain norm for every `m`.
    """
    scale = ops.stop_gradient(
        ops.maximum(ops.max(ops.abs(x), axis=axis, keepdims=True), 1.0))
    squared = ops.sum(ops.square(x / scale), axis=axis, keepdims=True)
    norm = scale * ops.sqrt(squared + epsilon / ops.square(scale))
    if keepdims:
        return norm
    return ops.squeeze(norm, axis=axis)


@keras_caps_export("keras_caps.ops.safe_norm")
def safe_norm(x, axis=-1, keepdims=False, epsilon=1e-7):
    """Euclidean norm `sqrt(sum(x**2) + epsilon)` with a finite gradient at 0.

    The sum and the square root are computed in float32 for float16 and
    bfloat16 inputs; the result is cast back to the input dtype.

    Args:
        x: Tensor.
        axis: int. Axis along which the norm is taken. Defaults to `-1`.
        keepdims: bool. Keep the reduced axis with size 1. Defaults to
            `False`.
        epsilon: float. Added under the square root. Defaults to `1e-7`,
            the Keras epsilon the official `Length` layer uses.

    Returns:
        Tensor of the dtype of `x`.

    Example:

    >>> round(float(keras_caps.ops.safe_norm(np.array([3.0, 4.0]))), 6)
    5.0
    """
    epsilon = _check_epsilon(epsilon)
    x = ops.convert_to_tensor(x)
    norm = _norm(at_least_float32(x), axis, keepdims, epsilon)
    return ops.cast(norm, x.dtype)


@keras_caps_export("keras_caps.ops.capsule_length")
def capsule_length(capsules, axis=-1, epsilon=1e-7):
    """Length of each capsule: `sqrt(sum(v**2) + epsilon)` over `axis`.

    Args:
        capsules: Tensor of shape `(..., num_capsules, capsule_dim)`.
        axis: int. The capsule-dimension axis. Defaults to `-1`.
        epsilon: float. Defaults to `1e-7`; an all-zero capsule has length
            `sqrt(epsilon)` and gradient 0.

    Returns:
        Tensor of shape `(..., num_capsules)`.

    Example:

    >>> tuple(keras_caps.ops.capsule_length(np.ones((2, 3, 4))).shape)
    (2, 3)
    """
    return safe_norm(capsules, axis=axis, keepdims=False, epsilon=epsilon)


@keras_caps_export("keras_caps.ops.squash")
def squash(x, axis=-1, variant="efficient", epsilon=1e-7):
    """Squashes vectors to a length in [0, 1) while keeping their direction.

    ```
    efficient (Mazzia et al. 2021):  v = (1 - exp(-|s|)) * s / |s|
    sabour    (Sabour et al. 2017):  v = |s|**2 / (1 + |s|**2) * s / |s|
    ```

    with `|s| = sqrt(sum(s**2) + epsilon)` computed in float32. The efficient
    form is evaluated as `tanh(|s| / 2) * (1 + exp(-|s|)) * s / |s|` (equal
    to `-expm1(-|s|) * s / |s|`, exact for small norms, and exportable to
    ONNX); near 0 it behaves like `v = s`. The Sabour form is
    `|s| / (1 + |s|**2) * s`, evaluated as `s / (|s| + 1 / |s|)`. Both are
    finite with finite gradients at `s = 0` and for huge `s`, in float32,
    float16 and bfloat16.

    Args:
        x: Tensor of capsules, the capsule dimension on `axis`.
        axis: int. Defaults to `-1`.
        variant: str. `"efficient"` or `"sabour"`. Defaults to
            `"efficient"`.
        epsilon: float. Defaults to `1e-7`.

    Returns:
        Tensor of the shape and dtype of `x`.

    Example:

    >>> v = keras_caps.ops.squash(np.array([3.0, 4.0]), variant="sabour")
    >>> np.round(keras.ops.convert_to_numpy(v).astype("float64"), 4).tolist()
    [0.5769, 0.7692]

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """
    check_choice("variant", variant, SQUASH_VARIANTS)
    epsilon = _check_epsilon(epsilon)
    x = ops.convert_to_tensor(x)
    wide = at_least_float32(x)
    norm = _norm(wide, axis, True, epsilon)
    if variant == "efficient":
        # 1 - exp(-|s|) = tanh(|s| / 2) * (1 + exp(-|s|)): as exact as
        # expm1 for small norms (tanh(x) ~ x), and made of operations that
        # every ONNX exporter converts (tf2onnx and PyTorch's TorchScript
        # exporter have no expm1).
        scale = ops.tanh(0.5 * norm) * (1.0 + ops.exp(-norm)) / norm
    else:
        scale = 1.0 / (norm + 1.0 / norm)  # |s| / (1 + |s|**2), no overflow
    return ops.cast(wide * scale, x.dtype)


@keras_caps_export("keras_caps.ops.mask_by_label")
def mask_by_label(capsules, labels):
    """Keeps the capsules selected by one-hot `labels`, zeroes the others.

    Args:
        capsules: Tensor of shape `(batch, num_capsules, capsule_dim)`.
        labels: One-hot (or multi-hot) tensor of shape
            `(batch, num_capsules)`, or `(batch, num_masks, num_capsules)`
            for several masks at once.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`, or
        `(batch, num_masks, num_capsules, capsule_dim)` for 3-D labels.
        No gradient flows into `labels`.

    Example:

    >>> capsules = np.ones((1, 3, 2))
    >>> masked = keras_caps.ops.mask_by_label(capsules, np.array([[0, 1, 0]]))
    >>> keras.ops.convert_to_numpy(masked)[0].tolist()
    [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    """
    capsules = ops.convert_to_tensor(capsules)
    mask = ops.stop_gradient(ops.cast(labels, capsules.dtype))
    if len(mask.shape) == 3:
        capsules = ops.expand_dims(capsules, 1)
    return capsules * ops.expand_dims(mask, -1)


def _first_maximum(values, dtype):
    """One-hot of `argmax(values, axis=-1)`: 1 at the first largest value.

    Written with comparisons and a cumulative sum rather than `argmax`,
    whose TensorFlow form (a sign-bit test through a bitcast) has no ONNX
    conversion.
    """
    # (..., n): 1 where the value is the maximum, then only the first such.
    is_maximum = ops.cast(
        values >= ops.max(values, axis=-1, keepdims=True), "int32")
    first = ops.logical_and(is_maximum > 0,
                            ops.cumsum(is_maximum, axis=-1) == 1)
    return ops.cast(first, dtype)


@keras_caps_export("keras_caps.ops.mask_by_length")
def mask_by_length(capsules, num_masks=None):
    """Keeps the longest capsule(s) and zeroes the others.

    Args:
        capsules: Tensor of shape `(batch, num_capsules, capsule_dim)`.
        num_masks: int or None. `None` keeps the single longest capsule and
            returns the shape of `capsules`. An integer k returns k masked
            copies, the i-th keeping the i-th longest capsule, in
            descending order of length (MultiMNIST's two-digit decoding).

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`, or
        `(batch, num_masks, num_capsules, capsule_dim)`.

    Example:

    >>> capsules = np.array([[[0.1, 0.0], [0.0, 0.5], [0.3, 0.0]]])
    >>> masked = keras_caps.ops.mask_by_length(capsules, num_masks=2)
    >>> lengths = keras.ops.convert_to_numpy(masked)[0, :, :, 0]
    >>> np.round(lengths.astype("float64"), 2).tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.3]]
    """
    capsules = ops.convert_to_tensor(capsules)
    num_capsules = capsules.shape[-2]
    lengths = capsule_length(capsules)  # (batch, num_capsules)
    if num_masks is None:
        labels = _first_maximum(lengths, capsules.dtype)
    else:
        num_masks = check_positive_int("num_masks", num_masks)
        if num_capsules is not None and num_masks > num_capsules:
            raise ValueError(
                "Received an invalid value for `num_masks`, expected at most "
                f"num_capsules={num_capsules}. Received: "
                f"num_masks={num_masks}")
        _, indices = ops.top_k(lengths, k=num_masks, sorted=True)
        labels = ops.one_hot(indices, num_capsules, dtype=capsules.dtype)
    return mask_by_label(capsules, labels)
