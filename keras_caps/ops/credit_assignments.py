"""End-to-end credit assignments through stacked routings (Heinsen 2022).

A routing's credit assignments `phi` (`VectorRouting(...,
return_credit=True)`) say how much each of its inputs
contributed to each of its outputs, additively. When routings are stacked,
the credit of the first layer's inputs for the last layer's outputs is the
chain of matrix products of the individual `phi`s (the paper's Appendix A).
"""

from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.ops.capsule_ops import at_least_float32
from keras_caps.validation import check_number


@keras_caps_export("keras_caps.ops.compose_credit_assignments")
def compose_credit_assignments(credit_assignments, epsilon=1e-5):
    """Composes the credit assignments of stacked routings end to end.

    ```
    prod = phi_1 / (std(phi_1) + epsilon)
    for phi in phi_2, ..., phi_L:
        prod = prod @ phi
        prod = prod / (std(prod) + epsilon)
    ```

    as in the paper's appendix and its `util.py`. The standard deviation is
    taken per example (over the last two axes), so an example's result does
    not depend on the rest of the batch; the reference takes it over the
    whole batch, which differs only by a positive scale per example. The
    products are computed in float32 for half-precision inputs, and the
    result is cast back to the dtype of `phi_1`. Padded inputs and
    disallowed pairs have zero credit and stay zero.

    Args:
        credit_assignments: list of tensors `[phi_1, ..., phi_L]`, `phi_k` of
            shape `(..., n_{k-1}, n_k)`: the credit each input of routing `k`
            gives each of its outputs. The outputs of routing `k` are the
            inputs of routing `k + 1`.
        epsilon: float. Added to the standard deviation. Defaults to `1e-5`,
            as the reference.

    Returns:
        Tensor of shape `(..., n_0, n_L)`: the end-to-end credit of each
        input of the first routing for each output of the last one (e.g.
        each token or pixel for each class), scaled to unit standard
        deviation per example.

    Example:

    >>> phi_1 = np.ones((2, 30, 4))   # 30 inputs -> 4 hidden vectors
    >>> phi_2 = np.ones((2, 4, 10))   # 4 hidden vectors -> 10 classes
    >>> tuple(keras_caps.ops.compose_credit_assignments([phi_1, phi_2]).shape)
    (2, 30, 10)

    Reference:
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754), Appendix A.
    """
    epsilon = check_number("epsilon", epsilon, minimum=0.0)
    if (not isinstance(credit_assignments, (list, tuple))
            or not credit_assignments):
        raise ValueError(
            "`credit_assignments` must be a non-empty list of tensors of "
            "shape (..., num_inputs, num_outputs), one per routing, first "
            "routing first. "
            f"Received: credit_assignments={credit_assignments!r}")
    tensors = [ops.convert_to_tensor(phi) for phi in credit_assignments]
    for index, phi in enumerate(tensors):
        if len(phi.shape) < 2:
            raise ValueError(
                "Each credit assignment must have shape (..., num_inputs, "
                "num_outputs). Received: "
                f"credit_assignments[{index}].shape={tuple(phi.shape)}")
    for index in range(1, len(tensors)):
        outputs = tensors[index - 1].shape[-1]
        inputs = tensors[index].shape[-2]
        if outputs is not None and inputs is not None and outputs != inputs:
            raise ValueError(
                "The outputs of each routing must be the inputs of the next: "
                f"credit_assignments[{index - 1}] has {outputs} outputs but "
                f"credit_assignments[{index}] has {inputs} inputs. Received: "
                "shapes="
                f"{[tuple(phi.shape) for phi in tensors]}")
    dtype = tensors[0].dtype
    product = None
    for phi in tensors:
        phi = at_least_float32(phi)
        product = phi if product is None else ops.matmul(
            product, ops.cast(phi, product.dtype))
        scale = ops.std(product, axis=(-2, -1), keepdims=True) + epsilon
        product = product / scale
    return ops.cast(product, dtype)
