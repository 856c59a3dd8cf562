"""Fully connected (class) capsules with EM routing."""

import math

import keras
import numpy as np
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.ops.em_routing import DEFAULT_EPSILON
from keras_caps.ops.em_routing import MATRIX_CAPSULE_SIZE
from keras_caps.ops.em_routing import POSE_SIZE
from keras_caps.ops.em_routing import em_inverse_temperatures
from keras_caps.ops.em_routing import fully_connected_em_routing
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

INPUT_KINDS = ("matrix", "vector")
OUTPUT_KINDS = ("matrix", "vector")
POSE_SIDE = 4


@keras_caps_export("keras_caps.layers.EMRouting")
class EMRouting(Router):
    """Fully connected capsules with EM routing (Hinton et al., 2018).

    Every child capsule `i` votes for every parent `j`; the parents are
    Gaussian clusters of the votes, fitted by Procedure 1 of the paper
    (`keras_caps.ops.fully_connected_em_routing`):

    ```
    R_ij = 1 / M                                       # uniform
    repeat num_iterations times (lambda_t = inverse_temperatures[t]):
        M-step: r_ij = R_ij a_i; mu_j, sigma2_j: the r-weighted mean and
                variance of the votes V_ij (+ epsilon);
                a_j = logistic(lambda_t (beta_a - sum_h (beta_u
                      + log sigma_jh) sum_i r_ij))
        E-step (not after the last): R_ij = softmax_j((log a_j
                + sum_h log N(V_ijh; mu_jh, sigma2_jh)) / temperature)
    ```

    Learned `beta_u` and `beta_a`, one each per parent. All of it runs in
    float32 and the log domain, so it is finite under `mixed_float16` and
    `mixed_bfloat16` and for children whose activation is 0 (they give no
    data to any parent). Activations are clipped to `[0, 1]`.

    Inputs (`input_kind`):

    - `"matrix"`, flat `(batch, N, 17)`: matrix capsules (a 4x4 pose
      row-major, then the activation, see
      `keras_caps.ops.split_matrix_capsules`); `V_ij = M_i W_ij` with one
      4x4 `W_ij` per child and parent.
    - `"matrix"`, grid `(batch, H, W, T, 17)`: the paper's class-capsule
      layer (§3): `W` is shared across positions per (child type, parent),
      and with `coordinate_addition=True` the scaled centre of each
      child's cell, `((row + 0.5) / H, (column + 0.5) / W)` in `[0, 1]`,
      is added to the first two entries of its votes (the receptive-field
      centre in image coordinates scaled to `[0, 1]`, for a stack whose
      windows are centred). Children are ordered `(row, column, type)`.
    - `"vector"`, `(batch, N, d)`: vector capsules (e.g. squashed primary
      capsules of `CapsuleClassifier`): the activation is the vector's
      length (clipped to 1) and the pose its direction, so the votes are
      `V_ij = (u_i / |u_i|) W_ij`, of `capsule_dim` entries (`W_ij` of
      shape `(d, capsule_dim)`).

    Outputs (`output_kind`, by default the input kind):

    - `"matrix"`: `(batch, M, capsule_dim + 1)`, each parent's mean `mu_j`
      then its activation `a_j` (`(batch, M, 17)` for 4x4 poses);
    - `"vector"`: `(batch, M, capsule_dim)`, `a_j mu_j / |mu_j|`: the
      direction of the mean with the activation as its length, so `Length`
      (and a margin loss) reads the EM activation as the class score.

    Couplings (`return_couplings=True`, `routing_trace`): `R` of each
    iteration, `(batch, 1, N, M)`, summing to 1 over the parents; the
    agreement is the E-step logits `log a_j + log p_ij` (zeros for the
    uniform first pass), and the routing temperature divides them (`1.0`
    is Procedure 1). The trace's votes are `V`, `(batch, N, M,
    capsule_dim)`.

    Gritzman (2019, arXiv 1907.00652) names three pitfalls: (1) a parent
    with one child gets a 0 variance: `epsilon` is added to every variance;
    (2) the cost grows with the amount of data a parent receives:
    `data_scale` multiplies it (`1.0`, the default, is Procedure 1 as
    written; `"auto"` scales by `M / N`, so a parent's data is about 1 per
    unit of child activation, whatever the number of children, Gritzman's
    rescaling). With hundreds of children per parent, Procedure 1's cost
    is hundreds of times `beta_u + log sigma` and the first activations
    are all 0 or all 1, where the logistic has no gradient: use
    `data_scale="auto"` there (e.g. 1152 squashed vector capsules into 10
    classes start at activations 1.0 with `1.0` and about 0.93 with
    `"auto"`); (3) parents compete for a child across positions: here
    every child reaches every parent, so `R` is normalised over all of
    them.

    Args:
        num_capsules: int. Number of parent capsules `M`.
        capsule_dim: int. Entries of each vote and parent mean: `16` (the
            default, 4x4 poses; required for matrix inputs) or any size
            for vector inputs.
        num_iterations: int. EM iterations (M-steps), at least 1. Defaults
            to `3`, the paper's.
        inverse_temperatures: `None`, a positive number (the final value
            of a linear ramp) or one positive number per iteration,
            non-decreasing: the `lambda` schedule (the paper gives no
            values). Defaults to `None`, the ramp `t / T` of
            `keras_caps.ops.em_inverse_temperatures`, `(1/3, 2/3, 1)`.
        input_kind: `"matrix"` or `"vector"`. Defaults to `"matrix"`.
        output_kind: `None` (the input kind), `"matrix"` or `"vector"`.
        coordinate_addition: bool. Add the scaled cell centre to the votes
            (grid matrix inputs only). Defaults to `False`.
        epsilon: float. Added to each variance, above 0. Defaults to
            `1e-4`.
        data_scale: float above 0 or `"auto"` (`M / N`). Multiplies the
            amount of data in the cost. Defaults to `1.0`.
        kernel_initializer: Initializer of the transforms. Defaults to
            `RandomNormal(stddev=0.5)` for matrix inputs, which keeps 4x4
            votes at the scale of the poses (each entry sums 4 products),
            and `RandomNormal(stddev=1.0)` for vector inputs, which gives
            unit-direction poses votes of unit scale. Votes of unit scale
            keep `log sigma` near 0, so the first activations are not
            saturated.
        kernel_regularizer: Regularizer for them. Defaults to `None`.
        kernel_constraint: Constraint for them. Defaults to `None`.
        temperature: float. Routing temperature, above 0. Defaults to
            `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Example:

    >>> layer = keras_caps.layers.EMRouting(5, coordinate_addition=True)
    >>> tuple(layer(np.zeros((2, 3, 3, 4, 17))).shape)
    (2, 5, 17)
    >>> layer.count_params()  # 4 * 5 * 16 + beta_u, beta_a + temperature
    331
    >>> head = keras_caps.layers.EMRouting(3, 8, input_kind="vector")
    >>> tuple(head(np.zeros((2, 6, 4))).shape)
    (2, 3, 8)

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    - [Gritzman, 2019](https://arxiv.org/abs/1907.00652)
    """

    def __init__(self, num_capsules, capsule_dim=POSE_SIZE, num_iterations=3,
                 inverse_temperatures=None, input_kind="matrix",
                 output_kind=None, coordinate_addition=False, epsilon=None,
                 data_scale=1.0, kernel_initializer=None,
                 kernel_regularizer=None, kernel_constraint=None,
                 temperature=1.0, **kwargs):
        self.num_iterations = check_positive_int("num_iterations",
                                                 num_iterations)
        self.inverse_temperatures = em_inverse_temperatures(
            self.num_iterations, inverse_temperatures)
        self.input_kind = check_choice("input_kind", input_kind, INPUT_KINDS)
        self.output_kind = check_choice("output_kind", output_kind,
                                        (None, *OUTPUT_KINDS))
        self.coordinate_addition = check_bool("coordinate_addition",
                                              coordinate_addition)
        self.epsilon = _check_epsilon(epsilon)
        self.data_scale = _check_data_scale(data_scale)
        if input_kind == "matrix" and capsule_dim != POSE_SIZE:
            raise ValueError(
                "Received an invalid value for `capsule_dim`, expected "
                f"{POSE_SIZE} (4x4 poses) with input_kind='matrix'. "
                f"Received: capsule_dim={capsule_dim!r}")
        if coordinate_addition and input_kind != "matrix":
            raise ValueError(
                "Received an invalid value for `coordinate_addition`, "
                "expected False with input_kind='vector' (it needs a grid "
                "of matrix capsules). Received: coordinate_addition=True")
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        if kernel_initializer is None:
            kernel_initializer = keras.initializers.RandomNormal(
                stddev=0.5 if input_kind == "matrix" else 1.0)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint))

    # --- Building --------------------------------------------------------

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # Vector children (n, d, m, p) contract d; pose matrices
        # (n or t, m, k, j) contract the pose's k.
        return {"kernel": (1,) if self.input_kind == "vector" else (2,)}

    def build_router(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        if self.input_kind == "vector":
            kernel_shape = (input_shape[1], input_shape[2],
                            self.num_capsules, self.capsule_dim)
        elif len(input_shape) == 5:  # (b, H, W, T, 17): shared per type
            kernel_shape = (input_shape[3], self.num_capsules, POSE_SIDE,
                            POSE_SIDE)
        else:  # (b, N, 17): one transform per child and parent
            kernel_shape = (input_shape[1], self.num_capsules, POSE_SIDE,
                            POSE_SIDE)
        self.kernel = self.add_weight(
            name="kernel", shape=kernel_shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self.beta_u = self.add_weight(
            name="beta_u", shape=(self.num_capsules,), initializer="zeros")
        self.beta_a = self.add_weight(
            name="beta_a", shape=(self.num_capsules,), initializer="zeros")
        self.input_spec = keras.InputSpec(
            ndim=len(input_shape),
            axes={axis: size for axis, size in enumerate(input_shape)
                  if axis > 0})

    # --- Routing ---------------------------------------------------------

    def compute_routing(self, inputs, keep_passes=False):
        self._check_input_shape(inputs.shape)
        votes, activations = self._votes_and_activations(inputs)
        num_children = votes.shape[1]
        data_scale = self.data_scale
        if data_scale == "auto":
            data_scale = self.num_capsules / num_children
        temperature = ops.maximum(self.temperature_variable,
                                  self.MIN_TEMPERATURE)
        result = fully_connected_em_routing(
            votes, activations, self.beta_u, self.beta_a,
            self.inverse_temperatures, epsilon=self.epsilon,
            keep_passes=keep_passes, temperature=temperature,
            data_scale=data_scale)
        parents = [self._outputs(means, parent_activations)
                   for means, parent_activations in zip(
                       result["means"], result["activations"])]
        return RoutingPasses(
            outputs=parents[-1],
            couplings=[ops.expand_dims(c, 1) for c in result["couplings"]],
            agreement=[ops.expand_dims(a, 1) for a in result["logits"]],
            parents=parents, votes=votes if keep_passes else None)

    def _votes_and_activations(self, inputs):
        """Float32 votes `(b, N, M, P)` and activations `(b, N)`."""
        inputs = ops.cast(inputs, "float32")
        kernel = ops.cast(self.kernel_value("kernel"), "float32")
        if self.input_kind == "vector":
            # A vector capsule's pose is its direction, its activation its
            # length: (b, N, 1)
            lengths = capsule_ops.capsule_length(inputs)[..., None]
            # (b, N, d) x (N, d, M, P) -> (b, N, M, P)
            votes = ops.einsum("bnd,ndmp->bnmp", inputs / lengths, kernel)
            return votes, ops.clip(lengths[..., 0], 0.0, 1.0)
        poses = ops.reshape(inputs[..., :POSE_SIZE],
                            (*ops.shape(inputs)[:-1], POSE_SIDE, POSE_SIDE))
        activations = ops.clip(inputs[..., POSE_SIZE], 0.0, 1.0)
        if len(inputs.shape) == 3:
            # (b, N, 4, 4) x (N, M, 4, 4) -> (b, N, M, 4, 4): M_i W_ij
            votes = ops.einsum("bnik,nmkj->bnmij", poses, kernel)
            return ops.reshape(votes, (*ops.shape(votes)[:3], POSE_SIZE)), (
                activations)
        # (b, H, W, T, 4, 4) x (T, M, 4, 4) -> (b, H, W, T, M, 4, 4)
        votes = ops.einsum("byxtik,tmkj->byxtmij", poses, kernel)
        shape = ops.shape(votes)
        votes = ops.reshape(votes, (*shape[:5], POSE_SIZE))
        if self.coordinate_addition:
            votes = votes + self._cell_centres(shape[1], shape[2])
        num_children = shape[1] * shape[2] * shape[3]
        return (ops.reshape(votes, (shape[0], num_children,
                                    self.num_capsules, POSE_SIZE)),
                ops.reshape(activations, (shape[0], num_children)))

    def _cell_centres(self, height, width):
        """`(H, W, 1, 1, 16)`: the scaled (row, column) centre, then 0s."""
        centres = np.zeros((height, width, 1, 1, POSE_SIZE), "float32")
        centres[..., 0] = ((np.arange(height) + 0.5) / height)[:, None,
                                                               None, None]
        centres[..., 1] = ((np.arange(width) + 0.5) / width)[None, :,
                                                             None, None]
        return ops.convert_to_tensor(centres)

    def _outputs(self, means, activations):
        """The parents in `output_kind`, in the compute dtype."""
        output_kind = self.output_kind or self.input_kind
        if output_kind == "matrix":
            # (b, M, P + 1): the mean, then the activation
            outputs = ops.concatenate(
                [means, ops.expand_dims(activations, -1)], -1)
        else:
            # a_j mu_j / |mu_j|: the activation as the length.
            norms = capsule_ops.safe_norm(means, keepdims=True)
            outputs = ops.expand_dims(activations, -1) * means / norms
        return ops.cast(outputs, self.compute_dtype)

    # --- Shapes ----------------------------------------------------------

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if self.input_kind == "vector":
            if len(input_shape) != 3 or input_shape[-1] is None:
                raise ValueError(
                    "`EMRouting` with input_kind='vector' expects vector "
                    "capsules (batch, num_input_capsules, "
                    "input_capsule_dim). Received: "
                    f"input_shape={input_shape}")
            return input_shape
        if (len(input_shape) not in (3, 5)
                or input_shape[-1] != MATRIX_CAPSULE_SIZE):
            raise ValueError(
                "`EMRouting` with input_kind='matrix' expects matrix "
                "capsules (batch, N, 17) or (batch, H, W, types, 17): a 4x4 "
                "pose (16 values), then the activation. Received: "
                f"input_shape={input_shape}")
        if self.coordinate_addition and len(input_shape) != 5:
            raise ValueError(
                "`EMRouting` with coordinate_addition=True expects a grid "
                "of matrix capsules (batch, H, W, types, 17). Received: "
                f"input_shape={input_shape}")
        if any(size is None for size in input_shape[1:]):
            raise ValueError(
                "`EMRouting` needs known sizes on every axis but the "
                f"batch. Received: input_shape={input_shape}")
        return input_shape

    def _num_children(self, input_shape):
        return int(np.prod(input_shape[1:-1]))

    def compute_output_shape(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        output_kind = self.output_kind or self.input_kind
        size = self.capsule_dim + (output_kind == "matrix")
        return (input_shape[0], self.num_capsules, size)

    def compute_couplings_shape(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        return (input_shape[0], 1, self._num_children(input_shape),
                self.num_capsules)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_iterations": self.num_iterations,
            "inverse_temperatures": list(self.inverse_temperatures),
            "input_kind": self.input_kind,
            "output_kind": self.output_kind,
            "coordinate_addition": self.coordinate_addition,
            "epsilon": self.epsilon,
            "data_scale": self.data_scale,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
        })
        config.update(serialize_regularizers_and_constraints(self,
                                                             ("kernel",)))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per child `i` and parent `j` (Hinton et al., 2018, Procedure 1):
        the vote, `4^3` for a 4x4 pose matrix, `input_dim * capsule_dim`
        for a vector; per M-step the weighted mean and variance over the
        children, `capsule_dim` each; per E-step (not after the last
        M-step) the log-likelihood's sum over the pose entries,
        `capsule_dim`. Per parent and M-step, the activation's sum over
        the pose entries, `capsule_dim`.
        """
        if self.input_kind == "vector":
            vote = int(input_shape[-1]) * self.capsule_dim
        else:
            vote = POSE_SIDE ** 3
        iterations = self.num_iterations
        return (self._child_parent_pairs(input_shape)
                * (vote + (3 * iterations - 1) * self.capsule_dim)
                + iterations * self.num_capsules * self.capsule_dim)


def _check_epsilon(epsilon):
    if epsilon is None:
        return DEFAULT_EPSILON
    epsilon = check_number("epsilon", epsilon)
    if not 0.0 < epsilon < math.inf:
        raise ValueError(
            "Received an invalid value for `epsilon`, expected a finite "
            f"number above 0. Received: epsilon={epsilon!r}")
    return epsilon


def _check_data_scale(data_scale):
    if data_scale == "auto":
        return data_scale
    try:
        value = check_number("data_scale", data_scale)
    except TypeError:
        raise TypeError(
            "Received an invalid type for `data_scale`, expected a number "
            f"above 0 or 'auto'. Received: data_scale={data_scale!r}"
        ) from None
    if not 0.0 < value < math.inf:
        raise ValueError(
            "Received an invalid value for `data_scale`, expected a finite "
            f"number above 0 or 'auto'. Received: data_scale={data_scale!r}")
    return value
