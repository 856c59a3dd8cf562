import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import COUPLINGS
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_bool
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints


@keras_caps_export("keras_caps.layers.DynamicRouting")
class DynamicRouting(Router):
    """Fully connected capsule layer with routing-by-agreement (Sabour et al.).

    Each input (child) capsule `i` votes for every output (parent) capsule
    `j` through its own `D_in x D_out` matrix. Routing logits start at zero
    for every example; each iteration turns them into couplings with a
    softmax over the parents, sums the weighted votes, squashes the sums
    (Sabour's squash) and adds the agreement between the votes and the
    parents to the logits.

    ```
    votes[i, j]     = inputs[i] @ kernel[i, :, j, :]                # (D_out,)
    logits[i, j]    = 0
    repeat num_iterations times:
        couplings[i, :] = softmax(logits[i, :] / temperature)       # over j
        outputs[j]      = squash(sum_i couplings[i, j] * votes[i, j] + bias[j])
        logits[i, j]   += <votes[i, j], outputs[j]>     # not after the last
    ```

    `HybridRouting` adds an attention term to the routing logits. With
    `coupling` other than `"softmax"` the couplings are the sparsemax,
    entmax-1.5, sigmoid gates or a straight-through Gumbel-softmax sample
    of `logits / temperature` (see `Router.normalize_couplings`).

    By default gradients flow through every iteration, as in the official
    code and the Keras port. With `stop_inner_gradients=True` the votes are
    constants in every iteration but the last (the variant of
    `naturomics/CapsNet-Tensorflow`), so the kernel's gradient equals the
    one obtained with the final couplings held constant. With `leaky=True`
    a zero "leak" logit is prepended for each child, the softmax runs over
    `num_capsules + 1` entries and the leak column is dropped, so a child's
    couplings sum to less than 1.

    The kernel layout `(num_input_capsules, input_dim, num_capsules,
    capsule_dim)` is the official one, `(1152, 8, 160)`, reshaped; Keras
    port kernels load after `transpose(W, (1, 3, 0, 2))`.

    Args:
        num_capsules: int. Number of output (parent) capsules.
        capsule_dim: int. Dimension of each output capsule.
        num_iterations: int. Number of routing iterations, at least 1.
            Defaults to `3`.
        stop_inner_gradients: bool. Stop the gradient through the votes in
            every iteration but the last. Defaults to `False` (full
            backpropagation).
        leaky: bool. Leaky routing: softmax over the parents and one extra
            zero logit, which is then dropped. Defaults to `False`.
        use_bias: bool. Add a learned `(num_capsules, capsule_dim)` bias to
            the weighted sums before the squash in every iteration, as the
            official code does. Defaults to `False`, as the paper and the
            Keras port.
        kernel_initializer: Initializer for the vote matrices. Defaults to
            `TruncatedNormal(stddev=0.1)`, as the official code.
        bias_initializer: Initializer for the bias. Defaults to
            `Constant(0.1)`, as the official code.
        kernel_regularizer: Regularizer for the vote matrices. Defaults to
            `None`.
        bias_regularizer: Regularizer for the bias. Defaults to `None`.
        kernel_constraint: Constraint for the vote matrices. Defaults to
            `None`.
        bias_constraint: Constraint for the bias. Defaults to `None`.
        temperature: float. Routing temperature, above 0: the couplings
            are `softmax(logits / temperature)`. Held as a non-trainable
            variable (`layer.temperature = 0.5` changes it, also during
            `fit`). Defaults to `1.0`, plain routing-by-agreement.
        coupling: str. `"softmax"` (the default, Sabour et al.),
            `"sparsemax"`, `"entmax15"`, `"sigmoid"` (gates that do not
            sum to 1) or `"gumbel_softmax"` (one-hot samples while
            training); see `Router`.
        gumbel_inference: str. `"argmax"` (the default) or `"softmax"`:
            the couplings of `coupling="gumbel_softmax"` outside training.
        seed: int. Seed of the Gumbel noise. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape
            `(batch, num_input_capsules, input_capsule_dim)`.
        training: bool. Whether the layer is training (draws the Gumbel
            samples of `coupling="gumbel_softmax"`). Defaults to `None`.
        return_couplings: bool. Also return the coupling coefficients of
            the last iteration, for analysis and routing maps. Defaults to
            `False`.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`; with
        `return_couplings=True`, a tuple `(outputs, couplings)` with
        couplings of shape `(batch, 1, num_input_capsules, num_capsules)`
        (the `Router` layout) that sum to 1 over the output capsules (to
        less than 1 with `leaky=True`). `routing_trace` returns every
        iteration's couplings and routing logits.

    Example:

    >>> layer = keras_caps.layers.DynamicRouting(num_capsules=10,
    ...                                          capsule_dim=16)
    >>> tuple(layer(np.zeros((2, 32, 8))).shape)
    (2, 10, 16)

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    keys_since_contract = ("temperature", "couplings_layout")
    coupling_options = COUPLINGS
    vote_squash = "sabour"  # Sabour et al. 2017, Eq. 1.

    def __init__(self, num_capsules, capsule_dim, num_iterations=3,
                 stop_inner_gradients=False, leaky=False, use_bias=False,
                 kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None,
                 kernel_constraint=None, bias_constraint=None,
                 temperature=1.0, **kwargs):
        num_iterations = check_positive_int("num_iterations", num_iterations)
        check_bool("stop_inner_gradients", stop_inner_gradients)
        check_bool("leaky", leaky)
        check_bool("use_bias", use_bias)
        if kernel_initializer is None:
            kernel_initializer = keras.initializers.TruncatedNormal(
                stddev=0.1)
        if bias_initializer is None:
            bias_initializer = keras.initializers.Constant(0.1)
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.num_iterations = num_iterations
        self.stop_inner_gradients = stop_inner_gradients
        self.leaky = leaky
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.input_spec = keras.InputSpec(ndim=3)

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (i, d, j, z): votes contract the children's d.
        return {"kernel": (1,)}

    def build_router(self, input_shape):
        self._check_input_shape(input_shape)
        num_inputs, input_dim = input_shape[-2], input_shape[-1]
        if num_inputs is None or input_dim is None:
            raise ValueError(
                f"`{type(self).__name__}` needs a known number of input "
                "capsules and input capsule dimension. Received: "
                f"input_shape={tuple(input_shape)}")
        self.kernel = self.add_weight(
            name="kernel",
            shape=(num_inputs, input_dim, self.num_capsules,
                   self.capsule_dim),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.num_capsules, self.capsule_dim),
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint)
        else:
            self.bias = None

    def compute_routing(self, inputs, keep_passes=False, training=None):
        self._check_input_shape(inputs.shape)
        # b: batch, i: input capsules, j: output capsules,
        # d: input capsule dim, z: output capsule dim
        # The votes are computed once, in the (b, j, i, z) layout where both
        # routing contractions are batched matrix products over (b, j) that
        # read the votes in place: no transposed copy per iteration.
        live_votes = capsule_ops.capsule_votes(
            inputs, self.kernel_value("kernel"))
        # The agreement reads float32 votes (a float32 copy only under
        # mixed precision): logits and softmax stay float32.
        live_wide_votes = capsule_ops.at_least_float32(live_votes)
        extra_logits = self.extra_logits(inputs, live_wide_votes)
        # (b, j, i): routing logits, per example, from the runtime batch.
        logits = ops.zeros(ops.shape(live_wide_votes)[:3], dtype="float32")
        outputs = None
        couplings_passes, logit_passes, parent_passes = [], [], []
        for iteration in range(self.num_iterations):
            is_last = iteration == self.num_iterations - 1
            stopped = self.stop_inner_gradients and not is_last
            votes = ops.stop_gradient(live_votes) if stopped else live_votes
            wide_votes = (ops.stop_gradient(live_wide_votes) if stopped
                          else live_wide_votes)
            routing_logits = logits
            if extra_logits is not None:  # (b, j, i), float32
                routing_logits = logits + extra_logits(outputs, stopped)
            couplings = self._couplings(routing_logits, training)  # (b, j, i)
            # (b, j, 1, i) @ (b, j, i, z) -> (b, j, z)
            weighted = ops.squeeze(ops.matmul(
                ops.expand_dims(ops.cast(couplings, votes.dtype), 2),
                votes), 2)
            if self.bias is not None:
                weighted = weighted + ops.cast(self.bias, weighted.dtype)
            outputs = capsule_ops.squash(weighted, variant="sabour")
            if keep_passes or is_last:
                couplings_passes.append(couplings)
                logit_passes.append(routing_logits)
                parent_passes.append(outputs)
            if not is_last:
                # (b, j, i, z) @ (b, j, z, 1) -> (b, j, i)
                logits = logits + ops.squeeze(ops.matmul(
                    wide_votes, ops.expand_dims(
                        capsule_ops.at_least_float32(outputs), -1)), -1)
        return RoutingPasses(
            outputs=outputs,
            couplings=[_router_layout(c) for c in couplings_passes],
            agreement=[_router_layout(a) for a in logit_passes],
            parents=parent_passes,
            votes=(ops.transpose(live_votes, (0, 2, 1, 3)) if keep_passes
                   else None))

    def extra_logits(self, inputs, wide_votes):
        """A term added to the routing logits in every iteration, or `None`.

        For subclasses such as `HybridRouting`: returns `None` (plain
        routing-by-agreement) or a function `(outputs, stopped) -> (batch,
        num_capsules, num_input_capsules)` float32 logits, given the
        current parents (`None` before the first iteration) and whether
        this iteration's votes are gradient-stopped. It is called once per
        layer call, so work constant across iterations is done once.

        Args:
            inputs: The children `(batch, num_input_capsules, input_dim)`.
            wide_votes: The votes `(batch, num_capsules,
                num_input_capsules, capsule_dim)` in at least float32.
        """
        return None

    def _couplings(self, logits, training):
        if not self.leaky:
            return self.normalize_couplings(logits, 1, training)
        leak = ops.zeros_like(logits[:, :1, :])  # (b, 1, i)
        couplings = self.normalize_couplings(
            ops.concatenate([leak, logits], axis=1), 1, training)
        return couplings[:, 1:, :]

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], self.num_capsules, self.capsule_dim)

    def compute_couplings_shape(self, input_shape):
        return (input_shape[0], 1, input_shape[1], self.num_capsules)

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        name = type(self).__name__
        if len(input_shape) != 3:
            raise ValueError(
                f"`{name}` expects a 3-D input (batch, "
                "num_input_capsules, input_capsule_dim). Received: "
                f"input_shape={input_shape}")
        if not self.built:
            return
        expected = tuple(self.kernel_value("kernel").shape[:2])
        for received, built in zip(input_shape[1:], expected):
            if received is not None and received != built:
                raise ValueError(
                    f"`{name}` was built for inputs of "
                    f"{expected[0]} capsules of dimension {expected[1]}, "
                    "expected an input of shape (batch, "
                    f"{expected[0]}, {expected[1]}). Received: "
                    f"input_shape={input_shape}")

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_iterations": self.num_iterations,
            "stop_inner_gradients": self.stop_inner_gradients,
            "leaky": self.leaky,
            "use_bias": self.use_bias,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer":
                keras.initializers.serialize(self.bias_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ("kernel", "bias")))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per child `i` and parent `j` (Sabour et al., 2017, Procedure 1):
        the vote `W_ij u_i`, `input_dim * capsule_dim`; per iteration the
        weighted sum `s_j = sum_i c_ij u_j|i`, `capsule_dim`; per
        iteration but the last the agreement `u_j|i . v_j`,
        `capsule_dim`.
        """
        input_dim = int(input_shape[-1])
        return self._child_parent_pairs(input_shape) * self.capsule_dim * (
            input_dim + 2 * self.num_iterations - 1)


def _router_layout(tensor):
    """(b, j, i) -> (b, 1, i, j), the `Router` couplings layout."""
    return ops.expand_dims(ops.transpose(tensor, (0, 2, 1)), 1)
