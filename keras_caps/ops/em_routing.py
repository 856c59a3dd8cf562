"""EM routing between matrix capsules (Hinton, Sabour & Frosst, ICLR 2018).

The maths of the paper's Procedure 1 on tensors, written with `keras.ops`
only, in float32 (half-precision inputs are widened, the results stay
float32) and in the log domain: Gaussian densities are summed as log
densities and the assignments are a max-shifted softmax of
`log a_j + log p_ij`, so nothing under- or overflows.

A *matrix capsule tensor* packs each capsule into its last axis of 17
values: the 16 entries of its 4x4 pose matrix (row-major), then its
logistic activation, e.g. `(batch, height, width, types, 17)` on a grid or
`(batch, capsules, 17)`. `split_matrix_capsules` and
`join_matrix_capsules` convert between that tensor and `(poses,
activations)`.

Shapes below: `N` children, `M` parents, `P` pose entries (16 for 4x4
poses), any leading axes `...` (batch, positions).

Gritzman (arXiv 1907.00652) names three pitfalls of implementing
Procedure 1; here is how each is handled:

1. *A parent with one child* (or with all of its data on one vote) gets a
   variance of 0 and an unbounded density. `epsilon` is added to every
   variance (default `1e-4`: a one-child parent's log density is then at
   most `-0.5 log(2 pi 1e-4) ~ 3.7` per pose entry, while votes of unit
   scale have variances around 1); a convolutional layer feeds each parent
   only the children of its window.
2. *The amount of data assigned to a parent* scales its cost: `sum_i r_ij`
   multiplies `beta_u + log sigma`, so a parent fed by more children pays
   more. The functions follow Procedure 1 as written (no rescaling);
   `em_m_step(..., data_scale=s)` multiplies the amount of data in the cost
   by `s` for a layer that wants Gritzman's rescaling (the means and
   variances do not change).
3. *Parents at different positions compete for a child*: the E-step
   normalises a child's assignments over every parent it reaches.
   `fully_connected_em_routing` normalises over all `M` parents; a
   convolutional layer normalises `em_log_likelihood`'s logits over all
   the parents, across positions and types, that hold the child in their
   window.

The inverse temperature `lambda` of the activation is a schedule, one value
per iteration, increasing; the paper gives no values, see
`em_inverse_temperatures` for the default.
"""

import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int

#: Entries of a 4x4 pose matrix.
POSE_SIZE = 16
#: Values per capsule in a matrix capsule tensor: the pose, then the
#: activation.
MATRIX_CAPSULE_SIZE = POSE_SIZE + 1
#: The variance floor of the M-step (Gritzman's first pitfall).
DEFAULT_EPSILON = 1e-4
# A parent whose amount of data `sum_i r_ij` is at most this (none: all its
# children inactive, or routed elsewhere) divides its weighted sums by 1
# instead: mean 0 and variance `epsilon` rather than 0 / 0, and gradients
# bounded by the votes, finite even once cast to float16. Every parent with
# more data gets Procedure 1 exactly.
NO_DATA = 1e-20
_LOG_2PI = math.log(2.0 * math.pi)


@keras_caps_export("keras_caps.ops.split_matrix_capsules")
def split_matrix_capsules(capsules):
    """`(poses (..., 16), activations (...))` of a matrix capsule tensor.

    Args:
        capsules: Tensor whose last axis holds 17 values per capsule: the
            4x4 pose (row-major), then the activation.

    Returns:
        The tuple `(poses, activations)`, of the dtype of `capsules`.

    Example:

    >>> capsules = np.arange(17.0).reshape(1, 17)
    >>> poses, activations = keras_caps.ops.split_matrix_capsules(capsules)
    >>> tuple(poses.shape), float(activations[0])
    ((1, 16), 16.0)
    """
    capsules = ops.convert_to_tensor(capsules)
    if capsules.shape[-1] != MATRIX_CAPSULE_SIZE:
        raise ValueError(
            "Received an invalid value for `capsules`, expected matrix "
            f"capsules with {MATRIX_CAPSULE_SIZE} values on the last axis "
            "(a 4x4 pose, then the activation). Received: "
            f"capsules.shape={tuple(capsules.shape)}")
    return capsules[..., :POSE_SIZE], capsules[..., POSE_SIZE]


@keras_caps_export("keras_caps.ops.join_matrix_capsules")
def join_matrix_capsules(poses, activations):
    """The matrix capsule tensor `(..., 17)` of poses and activations.

    Args:
        poses: Tensor `(..., 16)`, the 4x4 poses row-major.
        activations: Tensor `(...)`.

    Returns:
        Tensor `(..., 17)` of the dtype of `poses`.

    Example:

    >>> capsules = keras_caps.ops.join_matrix_capsules(
    ...     np.zeros((2, 3, 16)), np.ones((2, 3)))
    >>> tuple(capsules.shape)
    (2, 3, 17)
    """
    poses = ops.convert_to_tensor(poses)
    if poses.shape[-1] != POSE_SIZE:
        raise ValueError(
            "Received an invalid value for `poses`, expected 4x4 poses with "
            f"{POSE_SIZE} values on the last axis. Received: "
            f"poses.shape={tuple(poses.shape)}")
    activations = ops.cast(activations, poses.dtype)
    return ops.concatenate([poses, ops.expand_dims(activations, -1)], -1)


@keras_caps_export("keras_caps.ops.em_inverse_temperatures")
def em_inverse_temperatures(num_iterations, inverse_temperatures=None):
    """The inverse temperature `lambda_t` of each EM iteration, validated.

    Procedure 1 raises the inverse temperature over the iterations but
    gives no values. The default here is the linear ramp to 1,
    `lambda_t = t / T` for `t = 1..T` (`(1/3, 2/3, 1)` for 3 iterations):
    increasing, as the paper asks, and ending at 1, so the last iteration's
    activation is the plain `logistic(beta_a - cost)` the learned betas are
    scaled for, while the early ones stay soft. A number is the final
    value of that ramp (`lambda_t = value * t / T`); a list or tuple gives
    every value.

    Args:
        num_iterations: int. Number of EM iterations `T`, at least 1.
        inverse_temperatures: `None`, a positive number, or a sequence of
            `num_iterations` positive, non-decreasing numbers.

    Returns:
        A tuple of `num_iterations` Python floats.

    Example:

    >>> keras_caps.ops.em_inverse_temperatures(4)
    (0.25, 0.5, 0.75, 1.0)
    >>> keras_caps.ops.em_inverse_temperatures(2, 0.01)
    (0.005, 0.01)
    """
    num_iterations = check_positive_int("num_iterations", num_iterations)
    if inverse_temperatures is None:
        inverse_temperatures = 1.0
    if not isinstance(inverse_temperatures, (list, tuple)):
        final = _check_inverse_temperature(inverse_temperatures,
                                           inverse_temperatures)
        return tuple(final * (t + 1) / num_iterations
                     for t in range(num_iterations))
    if len(inverse_temperatures) != num_iterations:
        raise ValueError(
            "Received an invalid value for `inverse_temperatures`, expected "
            f"one value per iteration ({num_iterations}). Received: "
            f"inverse_temperatures={inverse_temperatures!r}")
    values = tuple(_check_inverse_temperature(value, inverse_temperatures)
                   for value in inverse_temperatures)
    if any(later < earlier for earlier, later in zip(values, values[1:])):
        raise ValueError(
            "Received an invalid value for `inverse_temperatures`, expected "
            "a non-decreasing schedule (Procedure 1 raises the inverse "
            f"temperature). Received: inverse_temperatures={values!r}")
    return values


def _check_inverse_temperature(value, schedule):
    try:
        value = check_number("inverse_temperatures", value)
    except (TypeError, ValueError):
        raise TypeError(
            "Received an invalid type for `inverse_temperatures`, expected "
            "None, a positive number or a sequence of them. Received: "
            f"inverse_temperatures={schedule!r}") from None
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            "Received an invalid value for `inverse_temperatures`, expected "
            "finite numbers above 0. Received: "
            f"inverse_temperatures={schedule!r}")
    return value


def _m_step(votes, weights, beta_u, beta_a, inverse_temperature, epsilon,
            data_scale):
    """The M-step on float32 tensors; activation logits instead of a."""
    # (..., N, M) -> (..., M): the amount of data each parent receives.
    amount = ops.sum(weights, axis=-2)
    # (..., N, M, 1): each child's share of its parent's data.
    divisor = ops.where(amount > NO_DATA, amount, 1.0)
    share = ops.expand_dims(weights / ops.expand_dims(divisor, -2), -1)
    means = ops.sum(share * votes, axis=-3)  # (..., M, P)
    deviations = votes - ops.expand_dims(means, -3)  # (..., N, M, P)
    variances = ops.sum(share * ops.square(deviations), axis=-3) + epsilon
    # sum_h cost_h = (P beta_u + 0.5 sum_h log var_h) * amount, (..., M)
    pose_size = votes.shape[-1]
    log_spread = 0.5 * ops.sum(ops.log(variances), axis=-1)
    cost = (pose_size * beta_u + log_spread) * (amount * data_scale)
    logits = inverse_temperature * (beta_a - cost)  # (..., M)
    return means, variances, logits


@keras_caps_export("keras_caps.ops.em_m_step")
def em_m_step(votes, weights, beta_u, beta_a, inverse_temperature,
              epsilon=DEFAULT_EPSILON, data_scale=1.0):
    """The M-step of EM routing (Hinton et al. 2018, Procedure 1).

    For every parent `j` and pose entry `h`, with `r_ij = R_ij a_i`:

    ```
    mu_jh      = sum_i r_ij V_ijh / sum_i r_ij
    sigma2_jh  = sum_i r_ij (V_ijh - mu_jh)^2 / sum_i r_ij + epsilon
    cost_h     = (beta_u + log sigma_jh) * sum_i r_ij * data_scale
    a_j        = logistic(lambda * (beta_a - sum_h cost_h))
    ```

    A parent that receives no data (`sum_i r_ij` at most `1e-20`, e.g.
    all its children inactive) gets mean 0 and variance `epsilon` instead
    of `0 / 0`, with gradients bounded by the votes; every other parent
    gets Procedure 1 exactly. Computed in float32.

    Args:
        votes: Tensor `(..., N, M, P)`, `V_ij`.
        weights: Tensor `(..., N, M)`, `r_ij = R_ij a_i`, non-negative.
        beta_u: Tensor broadcasting against `(..., M)`, e.g. `(M,)`.
        beta_a: Tensor broadcasting against `(..., M)`, e.g. `(M,)`.
        inverse_temperature: float or scalar tensor, `lambda`.
        epsilon: float. Added to every variance. Defaults to `1e-4`.
        data_scale: float. Multiplies the amount of data in the cost (1:
            Procedure 1 as written). Defaults to `1.0`.

    Returns:
        The tuple `(means (..., M, P), variances (..., M, P), activations
        (..., M))`, float32.

    Example:

    >>> votes = np.array([[[1.0]], [[3.0]]])  # N=2, M=1, P=1
    >>> means, variances, activations = keras_caps.ops.em_m_step(
    ...     votes, np.ones((2, 1)), np.zeros(1), np.zeros(1), 1.0, 0.0)
    >>> float(means[0, 0]), float(variances[0, 0])
    (2.0, 1.0)
    >>> float(activations[0])  # cost 0: logistic(0)
    0.5
    """
    epsilon = check_number("epsilon", epsilon, minimum=0.0)
    means, variances, logits = _m_step(
        _wide(votes), _wide(weights), _wide(beta_u), _wide(beta_a),
        _wide(inverse_temperature), epsilon, _wide(data_scale))
    return means, variances, ops.sigmoid(logits)


@keras_caps_export("keras_caps.ops.em_log_likelihood")
def em_log_likelihood(votes, means, variances):
    """`log p_ij = sum_h log N(V_ijh; mu_jh, sigma2_jh)`, the E-step's density.

    Procedure 1's `p_ij` is a product of Gaussian densities over the pose
    entries; its logarithm is the sum of the log densities, computed in
    float32 so a far vote gives a very negative number instead of a 0
    density:

    ```
    log p_ij = -0.5 * sum_h (log(2 pi sigma2_jh)
                             + (V_ijh - mu_jh)^2 / sigma2_jh)
    ```

    Args:
        votes: Tensor `(..., N, M, P)`.
        means: Tensor `(..., M, P)`.
        variances: Tensor `(..., M, P)`, positive.

    Returns:
        Tensor `(..., N, M)`, float32.

    Example:

    >>> log_p = keras_caps.ops.em_log_likelihood(
    ...     np.zeros((1, 1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    >>> round(float(log_p[0, 0]), 4)  # log N(0; 0, 1)
    -0.9189
    """
    votes, means, variances = _wide(votes), _wide(means), _wide(variances)
    # (..., 1, M): the normalising terms, summed over the pose entries once
    log_norm = ops.expand_dims(
        ops.sum(ops.log(variances), axis=-1) + votes.shape[-1] * _LOG_2PI,
        -2)
    means = ops.expand_dims(means, -3)  # (..., 1, M, P)
    variances = ops.expand_dims(variances, -3)
    # (..., N, M)
    distances = ops.sum(ops.square(votes - means) / variances, axis=-1)
    return -0.5 * (distances + log_norm)


@keras_caps_export("keras_caps.ops.fully_connected_em_routing")
def fully_connected_em_routing(votes, activations, beta_u, beta_a,
                               inverse_temperatures, epsilon=DEFAULT_EPSILON,
                               keep_passes=False, temperature=1.0,
                               data_scale=1.0):
    """Fully connected EM routing (Hinton et al. 2018, Procedure 1).

    Every child reaches every parent; the assignments `R` start uniform and
    each iteration runs an M-step (`em_m_step`) and, but after the last,
    an E-step:

    ```
    R_ij  = 1 / M
    for t = 1..T:
        mu, sigma2, a_j = M-step(V, R_ij a_i, lambda_t)
        logits_ij = log a_j + log p_ij              (not after the last)
        R_ij      = softmax_j(logits_ij / temperature)
    ```

    `log a_j` is the log-sigmoid of the activation's logit and `log p_ij`
    is `em_log_likelihood`, so the softmax (shifted by its maximum) never
    sees a 0 density; with `temperature` 1 it is the paper's
    `a_j p_ij / sum_k a_k p_ik`. Each iteration's assignments, with the
    logits that gave them (zeros for the uniform start), are the routing
    passes a `Router` reports. A child with activation 0 gives no data to
    any parent and changes nothing; it still gets assignments. The module
    docstring says how Gritzman's three pitfalls are handled.

    Args:
        votes: Tensor `(..., N, M, P)`.
        activations: Tensor `(..., N)` of child activations in `[0, 1]`.
        beta_u: Tensor broadcasting against `(..., M)`, e.g. `(M,)`.
        beta_a: Tensor broadcasting against `(..., M)`, e.g. `(M,)`.
        inverse_temperatures: sequence of `T` floats or scalar tensors,
            `lambda_t` (see `em_inverse_temperatures`).
        epsilon: float. Variance floor. Defaults to `1e-4`.
        keep_passes: bool. Return every iteration, not only the last.
            Defaults to `False`.
        temperature: float or scalar tensor. Divides the E-step logits.
            Defaults to `1.0`.
        data_scale: float. See `em_m_step`. Defaults to `1.0`.

    Returns:
        A dict of lists (one entry per iteration, or only the last one),
        float32: `"means"` `(..., M, P)`, `"variances"` `(..., M, P)`,
        `"activations"` `(..., M)`, `"couplings"` `(..., N, M)` (the `R`
        the iteration's M-step used) and `"logits"` `(..., N, M)` (the
        E-step logits that gave them, zeros for the first iteration).

    Example:

    >>> result = keras_caps.ops.fully_connected_em_routing(
    ...     np.zeros((2, 5, 3, 16)), np.ones((2, 5)), np.zeros(3),
    ...     np.zeros(3), inverse_temperatures=(0.5, 1.0))
    >>> tuple(result["means"][-1].shape), tuple(result["couplings"][-1].shape)
    ((2, 3, 16), (2, 5, 3))
    """
    epsilon = check_number("epsilon", epsilon, minimum=0.0)
    if len(inverse_temperatures) < 1:
        raise ValueError(
            "Received an invalid value for `inverse_temperatures`, expected "
            "one value per iteration, at least one. Received: "
            f"inverse_temperatures={inverse_temperatures!r}")
    votes, beta_u, beta_a = _wide(votes), _wide(beta_u), _wide(beta_a)
    activations = ops.expand_dims(_wide(activations), -1)  # (..., N, 1)
    data_scale, temperature = _wide(data_scale), _wide(temperature)
    logits = ops.zeros(ops.shape(votes)[:-1], dtype="float32")  # (..., N, M)
    couplings = ops.softmax(logits, axis=-1)
    result = {key: [] for key in ("means", "variances", "activations",
                                  "couplings", "logits")}
    for t, inverse_temperature in enumerate(inverse_temperatures):
        is_last = t == len(inverse_temperatures) - 1
        means, variances, activation_logits = _m_step(
            votes, couplings * activations, beta_u, beta_a,
            _wide(inverse_temperature), epsilon, data_scale)
        if keep_passes or is_last:
            for key, value in (
                    ("means", means), ("variances", variances),
                    ("activations", ops.sigmoid(activation_logits)),
                    ("couplings", couplings), ("logits", logits)):
                result[key].append(value)
        if not is_last:
            # (..., N, M): log a_j + log p_ij
            logits = ops.expand_dims(
                ops.log_sigmoid(activation_logits), -2) + em_log_likelihood(
                    votes, means, variances)
            couplings = _tempered_softmax(logits, temperature)
    return result


def _tempered_softmax(logits, temperature):
    """`softmax(logits / temperature)` over the parents, max-shifted."""
    shift = ops.stop_gradient(ops.max(logits, axis=-1, keepdims=True))
    return ops.softmax((logits - shift) / temperature, axis=-1)


def _wide(x):
    """`x` as a float32 tensor (routing runs in float32 under every policy)."""
    x = ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(x.dtype) != "float32":
        return ops.cast(x, "float32")
    return x
