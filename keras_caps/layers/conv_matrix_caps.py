"""Convolutional matrix capsules with EM routing."""

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
from keras_caps.ops.em_routing import NO_DATA
from keras_caps.ops.em_routing import POSE_SIZE
from keras_caps.ops.em_routing import em_inverse_temperatures
from keras_caps.validation import check_int_pair
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

# A matrix capsule: the 16 entries of its 4 x 4 pose (row-major), then its
# logistic activation.
POSE_SIDE = 4
CAPSULE_SIZE = MATRIX_CAPSULE_SIZE
_LOG_2PI = math.log(2.0 * math.pi)


@keras_caps_export("keras_caps.layers.ConvMatrixCaps")
class ConvMatrixCaps(Router):
    """Convolutional matrix capsules with EM routing (Hinton et al., 2018).

    Each parent at output position `(y, x)` sees the `K x K x B` child
    capsules of its window (`"valid"` windows, stride `s`); child `i` of
    window offset `(p, q)` and type `t` votes for parent type `c` with
    `V_ic = M_i W[p, q, t, c]`, the product of 4 x 4 matrices, one learned
    `W` per (kernel offset, child type, parent type) shared across
    positions (Hinton, Sabour & Frosst, 2018, Section 3). The parents are
    routed by Procedure 1 of the paper:

    ```
    R_ij = 1 / (number of parents child i reaches)        # uniform
    repeat num_iterations times (lambda_t = inverse_temperatures[t]):
        M-step per parent j, over the children i in its window:
            r_ij  = R_ij a_i
            mu_j, sigma2_j = weighted mean and variance of V_ij (+ eps)
            a_j   = logistic(lambda_t (beta_a - sum_h (beta_u + log
                    sigma_jh) sum_i r_ij))
        E-step (not after the last M-step), per child i:
            R_ij = softmax over every parent j child i reaches, at every
                   output position and of every type, of
                   (log a_j + sum_h log N(V_ijh; mu_jh, sigma2_jh))
                   / temperature
    ```

    The parent's pose is `mu_j` (4 x 4), its activation `a_j`. The maths
    is that of `keras_caps.ops.em_m_step` and `em_log_likelihood` (same
    epsilon, same rule for a parent without data), computed per parent
    over its window as batched matrix products: the weighted mean and
    variance as first and second moments, the log density's quadratic
    term expanded (`V^2 / sigma2 - 2 V mu / sigma2 + mu^2 / sigma2`), so
    no `votes - mean` tensor is built; these products have a hand-written
    backward pass that keeps the votes but not their squares (the same
    gradients in less memory). It runs in float32 and the log
    domain (`log a_j` is the log-sigmoid of the activation's logit), so
    it stays finite under `mixed_float16` and `mixed_bfloat16` and for
    children whose activation is 0; the moments lose float32 precision
    only for a variance far below the squared mean (below `epsilon`'s
    scale for votes of unit size).

    Gritzman (2019, arXiv 1907.00652) names three pitfalls of the paper's
    procedure; here:

    1. *A parent with one child* (variance 0, infinite density): `epsilon`
       is added to every variance, and a parent is fed only by the
       children of its own window.
    2. *Normalising the amount of data assigned to a parent*: not
       rescaled; the cost is multiplied by `sum_i r_ij` as in Procedure 1
       (a parent of a larger window pays a larger cost, which `beta_u`,
       `beta_a` and the inverse temperatures absorb), as
       `keras_caps.ops.em_m_step` with its default `data_scale=1`.
    3. *Parents at different positions compete for a child*: the E-step
       normalises `R_ij` over **all** the parents a child reaches, across
       output positions and types, not within one window: the per-window
       log-sum-exp is folded back onto the child grid (the adjoint of the
       window extraction, a gather: a segment sum over the grid cells),
       shifted by each child's maximum, and read back per window. Memory stays
       linear in the batch size and the grid area; no children x parents
       tensor over the whole grid is built. The first, uniform pass gives
       each child `1 / (n_i C)` for its `n_i` windows.

    Couplings (`return_couplings=True`, `routing_trace`): the `Router`
    layout `(batch, 1, H' * W' * K * K * B, C)`, one row per (output
    position, window offset, child type), row-major, like
    `InvertedAttentionRouting`'s convolutional form; `couplings_grid`
    gives `(H', W')`. A row does **not** sum to 1 over its window's
    parents: each child's rows, over all the windows it lies in, sum to 1
    together (`couplings_children` names each row's child). Children that
    no window covers (the last rows and columns a stride skips) route
    nowhere. The trace's agreement is the E-step logits `log a_j + log
    p_ij` (zeros for the uniform pass); its votes are `V` in the same
    layout, `(batch, H' * W' * K * K * B, C, 16)`.

    Args:
        num_capsules: int. Parent capsule types `C` per position.
        kernel_size: int or 2 ints. The window `K`. Defaults to `3`, the
            paper's.
        strides: int or 2 ints. Window strides. Defaults to `1`.
        num_iterations: int. EM iterations (M-steps), at least 1.
            Defaults to `3`, the paper's.
        inverse_temperatures: `None`, a positive number (the final value
            of a linear ramp) or one positive number per iteration,
            non-decreasing: the `lambda` schedule of the M-step's
            activation (the paper gives no values). Defaults to `None`,
            `keras_caps.ops.em_inverse_temperatures`' ramp `t / T`,
            `(1/3, 2/3, 1)` for 3 iterations.
        epsilon: float. Added to each variance, above 0. Defaults to
            `1e-4` (`keras_caps.ops.em_m_step`'s).
        kernel_initializer: Initializer of the 4 x 4 transforms. Defaults
            to `RandomNormal(stddev=0.5)`, which keeps the votes at the
            scale of the poses (each vote entry sums 4 products).
        kernel_regularizer: Regularizer for them. Defaults to `None`.
        kernel_constraint: Constraint for them. Defaults to `None`.
        temperature: float. Routing temperature, above 0: it divides the
            E-step logits (`1.0`, the default, is Procedure 1).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Input shape:
        `(batch, H, W, B, 17)` matrix capsules: 16 pose entries, then the
        activation (clipped to `[0, 1]`; an activation of 0 or less
        passes no gradient: turning an inactive child on would give a
        tight parent data far from its mean, a derivative of order
        `1 / epsilon^2` that overflows float16).

    Output shape:
        `(batch, H', W', C, 17)`, `H' = (H - K) // s + 1`.

    Example:

    >>> layer = keras_caps.layers.ConvMatrixCaps(4, kernel_size=3,
    ...                                          strides=2)
    >>> tuple(layer(np.zeros((2, 7, 7, 3, 17))).shape)
    (2, 3, 3, 4, 17)
    >>> layer.count_params()  # 3 * 3 * 3 * 4 * 16, beta_u, beta_a, temperature
    1737

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    - [Gritzman, 2019](https://arxiv.org/abs/1907.00652)
    """

    def __init__(self, num_capsules, kernel_size=3, strides=1,
                 num_iterations=3, inverse_temperatures=None, epsilon=None,
                 kernel_initializer=None, kernel_regularizer=None,
                 kernel_constraint=None, temperature=1.0, **kwargs):
        kwargs.pop("capsule_dim", None)  # always 17, not an argument
        self.kernel_size = check_int_pair("kernel_size", kernel_size)
        self.strides = check_int_pair("strides", strides)
        self.num_iterations = check_positive_int("num_iterations",
                                                 num_iterations)
        self.inverse_temperatures = em_inverse_temperatures(
            self.num_iterations, inverse_temperatures)
        if epsilon is None:
            epsilon = DEFAULT_EPSILON
        epsilon = check_number("epsilon", epsilon)
        if not 0.0 < epsilon < math.inf:
            raise ValueError(
                "Received an invalid value for `epsilon`, expected a finite "
                f"number above 0. Received: epsilon={epsilon!r}")
        self.epsilon = epsilon
        super().__init__(num_capsules, CAPSULE_SIZE, temperature=temperature,
                         **kwargs)
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.5))
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint))

    # --- Building --------------------------------------------------------

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (kh, kw, t, m, k, j): each pose row's k is contracted.
        return {"kernel": (4,)}

    def build_router(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        _, height, width, num_types, _ = input_shape
        kernel_h, kernel_w = self.kernel_size
        self._grid = (height, width)
        self._out_grid = self._output_size(input_shape)
        self._num_types = num_types
        self._window_size = kernel_h * kernel_w * num_types
        self.kernel = self.add_weight(
            name="kernel", shape=(kernel_h, kernel_w, num_types,
                                  self.num_capsules, POSE_SIDE, POSE_SIDE),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint, autocast=False)
        # Routing runs in float32: the weights are read as float32 under
        # every dtype policy (autocast=False).
        self.beta_u = self.add_weight(
            name="beta_u", shape=(self.num_capsules,), initializer="zeros",
            autocast=False)
        self.beta_a = self.add_weight(
            name="beta_a", shape=(self.num_capsules,), initializer="zeros",
            autocast=False)
        # How many windows hold each child: (H, W, 1), 0 where none does.
        counts = np.zeros((height, width, 1), "float32")
        for p in range(kernel_h):
            for q in range(kernel_w):
                counts[self._offset_rows(p), self._offset_columns(q)] += 1
        self._uncovered = (counts == 0).astype("float32")
        # The uniform first pass, 1 / (n_i C) per window entry: (H', W',
        # 1, N), broadcast over the parent types.
        uniform = 1.0 / (np.maximum(counts, 1.0) * self.num_capsules)
        self._uniform = self._windows_numpy(
            np.broadcast_to(uniform, (height, width, num_types)))[:, :, None]
        # The grid cell (row-major) of each window entry: (H' W' K K,).
        self._cells = self._windows_numpy(np.arange(
            height * width).reshape(height, width, 1)).reshape(-1).astype(
                "int32")
        self.input_spec = keras.InputSpec(
            ndim=5, axes={1: height, 2: width, 3: num_types,
                          4: CAPSULE_SIZE})

    def _offset_rows(self, p):
        """The child rows of kernel row `p` over the output rows: a slice."""
        return slice(p, p + self.strides[0] * (self._out_grid[0] - 1) + 1,
                     self.strides[0])

    def _offset_columns(self, q):
        return slice(q, q + self.strides[1] * (self._out_grid[1] - 1) + 1,
                     self.strides[1])

    def _windows_numpy(self, grid):
        """`(H, W, B)` -> the window layout `(H', W', K * K * B)`."""
        kernel_h, kernel_w = self.kernel_size
        slices = [grid[self._offset_rows(p), self._offset_columns(q)]
                  for p in range(kernel_h) for q in range(kernel_w)]
        stacked = np.stack(slices, axis=2)  # (H', W', K * K, B)
        return stacked.reshape((*self._out_grid, -1)).astype("float32")

    # --- Routing ---------------------------------------------------------
    # b: batch, y, x: output rows and columns, c: parent types, n: window
    # children (kernel row, kernel column, child type), h: the 16 pose
    # entries. The routing state is float32 (b, y, x, c, n): per parent,
    # its window's children, so both steps are batched matrix products.

    def compute_routing(self, inputs, keep_passes=False):
        windows = capsule_ops.at_least_float32(self._windows(inputs))
        # (b, y, x, n): probabilities. An inactive child (activation <= 0)
        # passes no gradient to its activation: turning it on would give a
        # tight parent (variance near epsilon) data far from its mean, a
        # derivative of order 1 / epsilon^2 that overflows float16.
        raw = windows[..., POSE_SIZE]
        activations = ops.where(raw > 0.0, ops.minimum(raw, 1.0), 0.0)
        votes = self._votes(windows[..., :POSE_SIZE])  # (b, y, x, c, n, h)
        # Read by the products' forward passes only: their backward passes
        # give the votes the whole gradient (see `_window_moments`).
        squares = ops.stop_gradient(ops.square(votes))
        # (b, y, x, c, n): the uniform first pass and its zero logits.
        couplings = ops.zeros_like(votes[..., 0]) + ops.convert_to_tensor(
            self._uniform)
        agreement = ops.zeros_like(couplings)
        passes = []
        for step, inverse_temperature in enumerate(self.inverse_temperatures):
            means, variances, logits = self._m_step(
                votes, squares, couplings * ops.expand_dims(activations, 3),
                inverse_temperature)
            passes.append((couplings, agreement, means, logits))
            if step + 1 < self.num_iterations:
                votes = _handle(votes)  # a handle per use: see `_handle`
                # (b, y, x, c, 1) + (b, y, x, c, n): the E-step logits.
                agreement = ops.expand_dims(ops.log_sigmoid(logits), -1) + (
                    self._log_likelihood(votes, squares, means, variances))
                couplings = self._normalise_over_reached_parents(agreement)
                votes = _handle(votes)
        if not keep_passes:
            passes = passes[-1:]
        return RoutingPasses(
            outputs=self._outputs(*passes[-1][2:]),
            couplings=[self._router_layout(c) for c, _, _, _ in passes],
            agreement=[self._router_layout(a) for _, a, _, _ in passes],
            parents=[self._outputs(m, a) for _, _, m, a in passes],
            votes=self._trace_votes(votes) if keep_passes else None)

    def _votes(self, poses):
        """`(b, y, x, n, 16)` poses -> `(b, y, x, c, n, 16)` votes.

        One batched matrix product per window child `n`: its pose rows at
        every position by its transforms to every parent type, then one
        transpose into the routing layout (TensorFlow lowers the einsum
        `byxnrk,nckt->byxcnrt` to several times slower transposes).
        """
        size, types = self._window_size, self.num_capsules
        # (n, b * y * x * 4, 4): child n's pose rows at every position
        rows = ops.reshape(ops.transpose(ops.reshape(
            poses, (-1, size, POSE_SIDE, POSE_SIDE)), (1, 0, 2, 3)),
            (size, -1, POSE_SIDE))
        kernel = capsule_ops.at_least_float32(
            ops.cast(self.kernel_value("kernel"), poses.dtype))
        # (n, 4, c * 4): [k, (c, t)] = W[n, c][k, t]
        kernel = ops.reshape(ops.transpose(ops.reshape(
            kernel, (size, types, POSE_SIDE, POSE_SIDE)), (0, 2, 1, 3)),
            (size, POSE_SIDE, types * POSE_SIDE))
        # (n, b y x, r, c, t) -> (b y x, c, n, r, t)
        votes = ops.reshape(ops.matmul(rows, kernel),
                            (size, -1, POSE_SIDE, types, POSE_SIDE))
        votes = ops.transpose(votes, (1, 3, 0, 2, 4))
        return ops.reshape(votes, (-1, *self._out_grid, types, size,
                                   POSE_SIZE))

    def _m_step(self, votes, squares, weights, inverse_temperature):
        """Procedure 1's M-step: means, variances, activation logits.

        `weights` `(b, y, x, c, n)` are `r_ij = R_ij a_i`. The weighted
        mean and variance are moments, `sum_i s_ij V_ij` and `sum_i s_ij
        V_ij^2 - mu_j^2` with `s_ij = r_ij / sum_i r_ij`: two batched
        matrix products over the window per parent (`_window_moments`)
        instead of the deviations `V - mu`. A parent without data
        (`sum_i r_ij = 0`) gets
        mean 0 and variance `epsilon`, as `keras_caps.ops.em_m_step`, and
        passes no gradient to its (inactive) children's activations.
        """
        has_data = ops.sum(weights, axis=-1) > NO_DATA  # (b, y, x, c)
        # A parent without data jumps to one child's vote (variance
        # epsilon) as soon as a child turns on: no gradient flows there.
        weights = ops.where(ops.expand_dims(has_data, -1), weights,
                            ops.stop_gradient(weights))
        amount = ops.sum(weights, axis=-1)
        divisor = ops.where(has_data, amount, 1.0)
        shares = ops.expand_dims(weights / ops.expand_dims(divisor, -1), -2)
        # (b, y, x, c, 1, n) @ (b, y, x, c, n, h) -> (b, y, x, c, 2, h)
        moments = _window_moments(votes, squares, shares)
        means, second = moments[..., 0, :], moments[..., 1, :]
        total = ops.expand_dims(ops.sum(shares, axis=(-2, -1)), -1)  # 1 or 0
        # sum_i s_ij (V_ij - mu_j)^2 = second - (2 - total) mu_j^2, >= 0
        variances = ops.relu(second - (2.0 - total) * ops.square(means))
        variances = variances + self.epsilon
        # sum_h cost_h = (16 beta_u + 0.5 sum_h log sigma2_h) sum_i r_ij
        cost = (POSE_SIZE * self.beta_u + 0.5 * ops.sum(
            ops.log(variances), axis=-1)) * amount
        logits = inverse_temperature * (self.beta_a - cost)  # (b, y, x, c)
        return means, variances, logits

    def _log_likelihood(self, votes, squares, means, variances):
        """`sum_h log N(V_ijh; mu_jh, sigma2_jh)`, `(b, y, x, c, n)`.

        Expanded as `V^2 / sigma2 - 2 V mu / sigma2 + mu^2 / sigma2`:
        two matrix-vector products over the 16 pose entries per parent
        (`_window_quadratic`).
        """
        inverse = 1.0 / variances  # (b, y, x, c, h)
        # (b, y, x, c, n, h), 2 x (b, y, x, c, h) -> (b, y, x, c, n)
        quadratic = _window_quadratic(votes, squares, inverse,
                                      means * inverse)
        constant = ops.sum(ops.square(means) * inverse + ops.log(
            variances), axis=-1) + POSE_SIZE * _LOG_2PI  # (b, y, x, c)
        return -0.5 * (quadratic + ops.expand_dims(constant, -1))

    def _normalise_over_reached_parents(self, logits):
        """Softmax of `logits / temperature` per child over all its parents.

        `logits` `(b, y, x, c, n)`: a child lies in up to `K * K` windows
        (the n of several positions); its couplings over all of them and
        all types sum to 1 (Gritzman's third pitfall). The shift is each
        child's own maximum, so the largest term is `exp(0) = 1` and the
        sum never underflows.
        """
        window_max = ops.stop_gradient(ops.max(logits, axis=-2))  # (b,y,x,n)
        child_max = self._fold(window_max, ops.segment_max)  # (b, H, W, B)
        shifted = self.temper(
            logits - ops.expand_dims(self._windows(child_max), -2))
        exponentials = ops.exp(shifted)  # (b, y, x, c, n), <= 1
        totals = self._fold(ops.sum(exponentials, axis=-2), ops.segment_sum)
        # Uncovered children have no terms; 1 keeps their log finite.
        log_totals = ops.log(totals + ops.convert_to_tensor(
            self._uncovered))  # (b, H, W, B)
        return ops.exp(shifted - ops.expand_dims(
            self._windows(log_totals), -2))

    # --- Window layout ---------------------------------------------------

    def _windows(self, grid):
        """`(b, H, W, B, ...)` -> `(b, H', W', K * K * B, ...)`: one gather."""
        shape = ops.shape(grid)
        grid = ops.reshape(grid, (-1, shape[1] * shape[2], *shape[3:]))
        # (b, H' * W' * K * K, B, ...): each window's grid cells.
        windows = ops.take(grid, ops.convert_to_tensor(self._cells), axis=1)
        return ops.reshape(windows, (-1, *self._out_grid, self._window_size,
                                     *shape[4:]))

    def _fold(self, values, segment_op):
        """`_windows`' adjoint: `(b, H', W', K * K * B)` -> `(b, H, W, B)`.

        `segment_op` (`ops.segment_sum` or `ops.segment_max`) combines the
        entries of each grid cell over the windows that hold it; a cell in
        no window gets the op's empty value (0, or the lowest number).
        """
        values = ops.reshape(values, (-1, len(self._cells), self._num_types))
        # (H' * W' * K * K, b, B) -> (H * W, b, B): segments on axis 0.
        folded = segment_op(ops.transpose(values, (1, 0, 2)),
                            ops.convert_to_tensor(self._cells),
                            num_segments=math.prod(self._grid))
        folded = ops.transpose(folded, (1, 0, 2))
        return ops.reshape(folded, (-1, *self._grid, self._num_types))

    def _outputs(self, means, logits):
        """`(b, y, x, c, 16)`, `(b, y, x, c)` logits -> `(b, y, x, c, 17)`."""
        capsules = ops.concatenate(
            [means, ops.expand_dims(ops.sigmoid(logits), -1)], axis=-1)
        return ops.cast(capsules, self.compute_dtype)

    def _router_layout(self, couplings):
        """`(b, y, x, c, n)` -> `(b, 1, y * x * n, c)`."""
        couplings = ops.transpose(couplings, (0, 1, 2, 4, 3))
        return ops.reshape(couplings,
                           (-1, 1, self._num_rows(), self.num_capsules))

    def _trace_votes(self, votes):
        """`(b, y, x, c, n, h)` -> `(b, y * x * n, c, h)`."""
        votes = ops.transpose(votes, (0, 1, 2, 4, 3, 5))
        return ops.reshape(votes, (-1, self._num_rows(), self.num_capsules,
                                   POSE_SIZE))

    def _num_rows(self):
        return math.prod(self._out_grid) * self._window_size

    # --- Shapes ----------------------------------------------------------

    def couplings_children(self, input_shape):
        """Each couplings row's child: an int array `(H' * W' * K * K * B,)`.

        Children are numbered row-major over `(H, W, B)`; the rows of one
        child, over all the windows it lies in, are normalised together.
        """
        input_shape = self._check_input_shape(input_shape)
        height, width, num_types = input_shape[1:4]
        kernel_h, kernel_w = self.kernel_size
        index = np.arange(height * width * num_types).reshape(
            (height, width, num_types))
        out_grid = self._output_size(input_shape)
        rows = [index[p:p + self.strides[0] * (out_grid[0] - 1) + 1:
                      self.strides[0],
                      q:q + self.strides[1] * (out_grid[1] - 1) + 1:
                      self.strides[1]]
                for p in range(kernel_h) for q in range(kernel_w)]
        return np.stack(rows, axis=2).reshape(-1)

    def _output_size(self, input_shape):
        return tuple((size - kernel) // stride + 1 for size, kernel, stride
                     in zip(input_shape[1:3], self.kernel_size, self.strides))

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 5 or input_shape[-1] != CAPSULE_SIZE:
            raise ValueError(
                "Received an invalid value for `inputs`, expected matrix "
                "capsules (batch, height, width, types, 17): a 4x4 pose "
                "(16 entries) and an activation per capsule. Received: "
                f"input_shape={input_shape}")
        if any(size is None for size in input_shape[1:]):
            raise ValueError(
                "Received an invalid value for `inputs`, expected every "
                "dimension but the batch size to be known. Received: "
                f"input_shape={input_shape}")
        height, width = input_shape[1:3]
        if self.kernel_size[0] > height or self.kernel_size[1] > width:
            raise ValueError(
                "Received an invalid value for `kernel_size`, expected a "
                f"window within the {height}x{width} capsule grid. "
                f"Received: kernel_size={self.kernel_size}, "
                f"input_shape={input_shape}")
        return input_shape

    def compute_output_shape(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        return (input_shape[0], *self._output_size(input_shape),
                self.num_capsules, CAPSULE_SIZE)

    def compute_couplings_shape(self, input_shape):
        input_shape = self._check_input_shape(input_shape)
        rows = (math.prod(self._output_size(input_shape))
                * math.prod(self.kernel_size) * input_shape[3])
        return (input_shape[0], 1, rows, self.num_capsules)

    def couplings_grid(self, input_shape):
        return self._output_size(self._check_input_shape(input_shape))

    def get_config(self):
        config = super().get_config()
        del config["capsule_dim"]
        config.update({
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "num_iterations": self.num_iterations,
            "inverse_temperatures": list(self.inverse_temperatures),
            "epsilon": self.epsilon,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
        })
        config.update(serialize_regularizers_and_constraints(self, ("kernel",)))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        As `EMRouting` with matrix capsules, per (window child, parent)
        pair over every output position (Hinton et al., 2018, Procedure 1
        and Section 3): the vote, `4^3`; per M-step the weighted mean and
        variance, 16 each; per E-step but after the last M-step the
        log-likelihood, 16; per parent, position and M-step the
        activation's sum over the pose, 16.
        """
        input_shape = self._check_input_shape(input_shape)
        pose = POSE_SIDE * POSE_SIDE
        iterations = self.num_iterations
        positions = math.prod(self._output_size(input_shape))
        return (self._child_parent_pairs(input_shape)
                * (POSE_SIDE ** 3 + (3 * iterations - 1) * pose)
                + iterations * positions * self.num_capsules * pose)


def _handle(x):
    """`x` again, through a no-copy reshape: a new node for autodiff.

    Giving each use of the votes its own handle chains the uses, so
    TensorFlow sums their gradients as it goes (two or three terms at a
    time) instead of holding all of them, each the size of the votes,
    for one sum at the end: about a quarter less peak memory in the
    training step of the smallNORB ConvCaps, the same gradients. A view
    on PyTorch, a no-op for XLA.

    Example:

    >>> tuple(_handle(np.zeros((2, 3))).shape)
    (2, 3)
    """
    return ops.reshape(x, ops.shape(x))


# --- Products over the window with a hand-written backward pass ---------
# Autodiff of `shares @ votes` and `shares @ votes^2` would hold the votes'
# squares for the backward pass and give every use two votes-sized
# gradients (to the votes and to their squares), summed separately. These
# two products hold only the votes and give one: the squares, an input of
# their forward passes, get no gradient (`None`) and are recomputed where
# the backward pass needs them. Values as the plain products.


@ops.custom_gradient
def _window_moments(votes, squares, shares):
    """`shares @ votes` and `shares @ squares`, `(..., 2, h)`.

    `votes` and `squares = votes^2` `(..., n, h)`, `shares` `(..., 1, n)`;
    the backward pass gives
    `d votes = shares^T (d mean + 2 votes d second)` and `d shares = d mean
    votes^T + d second (votes^2)^T`.

    Example:

    >>> votes = ops.reshape(ops.arange(6.0), (3, 2))
    >>> shares = ops.full((1, 3), 0.5)
    >>> moments = _window_moments(votes, ops.square(votes), shares)
    >>> ops.convert_to_numpy(moments).tolist()
    [[3.0, 4.5], [10.0, 17.5]]
    """
    moments = ops.concatenate([ops.matmul(shares, votes),
                               ops.matmul(shares, squares)], -2)

    def gradient(*args, upstream=None):
        if upstream is None:  # TensorFlow and JAX pass it positionally
            (upstream,) = args
        d_mean, d_second = upstream[..., :1, :], upstream[..., 1:, :]
        # Outer products (..., n, 1) @ (..., 1, h): faster than broadcasts.
        column = ops.swapaxes(shares, -1, -2)
        d_votes = ops.matmul(column, d_mean) + votes * ops.matmul(
            column, 2.0 * d_second)
        # (..., 1, h) @ (..., h, n) -> (..., 1, n)
        d_shares = ops.matmul(d_mean, ops.swapaxes(votes, -1, -2)) + (
            ops.matmul(d_second, ops.swapaxes(ops.square(votes), -1, -2)))
        return d_votes, None, d_shares

    return moments, gradient


@ops.custom_gradient
def _window_quadratic(votes, squares, inverse, scaled_means):
    """`sum_h squares inverse - 2 votes scaled_means`, `(..., n)`.

    `votes` and `squares = votes^2` `(..., n, h)`, `inverse` and
    `scaled_means` `(..., h)`; the
    backward pass gives `d votes = 2 d q (votes inverse - scaled_means)`.

    Example:

    >>> votes = ops.reshape(ops.arange(6.0), (3, 2))
    >>> quadratic = _window_quadratic(votes, ops.square(votes), ops.ones(2),
    ...                               ops.zeros(2))
    >>> ops.convert_to_numpy(quadratic).tolist()
    [1.0, 13.0, 41.0]
    """
    quadratic = ops.squeeze(ops.matmul(
        squares, ops.expand_dims(inverse, -1)), -1) - 2.0 * (
            ops.squeeze(ops.matmul(votes, ops.expand_dims(scaled_means, -1)),
                        -1))

    def gradient(*args, upstream=None):
        if upstream is None:  # TensorFlow and JAX pass it positionally
            (upstream,) = args
        column = ops.expand_dims(2.0 * upstream, -1)  # (..., n, 1)
        # Outer products (..., n, 1) @ (..., 1, h): faster than broadcasts.
        d_votes = votes * ops.matmul(column, ops.expand_dims(
            inverse, -2)) - ops.matmul(column, ops.expand_dims(
                scaled_means, -2))
        # (..., 1, n) @ (..., n, h) -> (..., h)
        row = ops.expand_dims(upstream, -2)
        d_inverse = ops.squeeze(ops.matmul(row, ops.square(votes)), -2)
        d_scaled = -2.0 * ops.squeeze(ops.matmul(row, votes), -2)
        return d_votes, None, d_inverse, d_scaled

    return quadratic, gradient
