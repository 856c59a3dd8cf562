import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.routing_temperature import RoutingTemperature
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

ATTENTION_FORMS = (None, "bilinear", "concat")
# The negative slope of the concatenation form's LeakyReLU, as in graph
# attention networks (Velickovic et al., 2018), whose scores it follows.
ATTENTION_LEAKY_SLOPE = 0.2


@keras_caps_export("keras_caps.layers.DynamicRouting")
class DynamicRouting(RoutingTemperature, keras.layers.Layer):
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

    With `attention="bilinear"` or `"concat"` the couplings take an
    attention term weighted by a learned scalar `lambda` (the hybrid of
    routing-by-agreement and attention), and the temperature divides the
    whole logit:

    ```
    couplings[i, :] = softmax((logits[i, :] + lambda * a[i, :]) / temperature)
    bilinear: a[i, j] = inputs[i] @ W_a @ votes[i, j] / sqrt(D_in)
    concat:   a[i, j] = LeakyReLU(w_a @ [votes[i, j]; outputs[j]] + b_a)
    ```

    `W_a` is `(D_in, D_out)`, so the bilinear score is a `D_in`-dimensional
    dot product, scaled as in scaled dot-product attention; it compares a
    child with its own vote and is the same in every iteration. The
    concatenation score (the form of graph attention networks, LeakyReLU
    slope 0.2) compares a vote with the current parent output: it is
    recomputed each iteration, with `outputs = 0` before the first. With
    `lambda = 0` the couplings are exactly those of plain routing, and the
    default initial `attention_weight=0.0` starts training from there.
    With `stop_inner_gradients=True` the attention term reads the same
    (stopped) votes as the agreement in the inner iterations.

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
        attention: `None`, `"bilinear"` or `"concat"`. The attention term
            added to the routing logits (see above). Defaults to `None`:
            plain routing-by-agreement, no extra weights.
        attention_weight: float. Initial value of the learned scalar
            `lambda` that weights the attention term (after `build`,
            `layer.attention_weight` is its variable). Defaults to `0.0`
            (training starts from plain routing). Ignored without
            `attention`.
        attention_initializer: Initializer for `W_a` (bilinear) or `w_a`
            (concat); `b_a` starts at zero. Defaults to
            `"glorot_uniform"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape
            `(batch, num_input_capsules, input_capsule_dim)`.
        return_couplings: bool. Also return the coupling coefficients of
            the last iteration, for analysis and routing maps. Defaults to
            `False`.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`; with
        `return_couplings=True`, a tuple `(outputs, couplings)` with
        couplings of shape `(batch, num_capsules, num_input_capsules)` (the
        layout of `FCCaps`) that sum to 1 over the output capsules (to
        less than 1 with `leaky=True`).

    Example:

    >>> layer = keras_caps.layers.DynamicRouting(num_capsules=10,
    ...                                          capsule_dim=16)
    >>> tuple(layer(np.zeros((2, 32, 8))).shape)
    (2, 10, 16)

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    """

    def __init__(self, num_capsules, capsule_dim, num_iterations=3,
                 stop_inner_gradients=False, leaky=False, use_bias=False,
                 kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None,
                 kernel_constraint=None, bias_constraint=None,
                 temperature=1.0, attention=None, attention_weight=0.0,
                 attention_initializer="glorot_uniform", **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        num_iterations = check_positive_int("num_iterations", num_iterations)
        check_bool("stop_inner_gradients", stop_inner_gradients)
        check_bool("leaky", leaky)
        check_bool("use_bias", use_bias)
        check_choice("attention", attention, ATTENTION_FORMS)
        attention_weight = check_number("attention_weight", attention_weight)
        if not math.isfinite(attention_weight):
            raise ValueError(
                "Received an invalid value for `attention_weight`, expected "
                "a finite number. Received: "
                f"attention_weight={attention_weight!r}")
        if kernel_initializer is None:
            kernel_initializer = keras.initializers.TruncatedNormal(
                stddev=0.1)
        if bias_initializer is None:
            bias_initializer = keras.initializers.Constant(0.1)
        super().__init__(**kwargs)
        self._init_temperature(temperature)
        self.num_capsules = num_capsules
        self.capsule_dim = capsule_dim
        self.num_iterations = num_iterations
        self.stop_inner_gradients = stop_inner_gradients
        self.leaky = leaky
        self.use_bias = use_bias
        self.attention = attention
        self._initial_attention_weight = attention_weight
        # Weights of the attention term, created by `build`.
        self.attention_kernel = None
        self.attention_bias = None
        self.attention_weight = None
        self.attention_initializer = keras.initializers.get(
            attention_initializer)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.input_spec = keras.InputSpec(ndim=3)

    def build(self, input_shape):
        self._check_input_shape(input_shape)
        num_inputs, input_dim = input_shape[-2], input_shape[-1]
        if num_inputs is None or input_dim is None:
            raise ValueError(
                "`DynamicRouting` needs a known number of input capsules and "
                "input capsule dimension. Received: "
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
        self._build_attention(input_dim)
        self._build_temperature()

    def _build_attention(self, input_dim):
        # No weights without attention: saved models stay as they were.
        self.attention_kernel = None
        self.attention_bias = None
        self.attention_weight = None
        if self.attention is None:
            return
        if self.attention == "bilinear":
            kernel_shape = (input_dim, self.capsule_dim)  # W_a
            self._inverse_sqrt_input_dim = 1.0 / math.sqrt(input_dim)
        else:
            kernel_shape = (2 * self.capsule_dim,)  # w_a on [vote; output]
        self.attention_kernel = self.add_weight(
            name="attention_kernel", shape=kernel_shape,
            initializer=self.attention_initializer)
        if self.attention == "concat":
            self.attention_bias = self.add_weight(
                name="attention_bias", shape=(), initializer="zeros")
        self.attention_weight = self.add_weight(
            name="attention_weight", shape=(),
            initializer=keras.initializers.Constant(
                self._initial_attention_weight))

    def call(self, inputs, return_couplings=False):
        self._check_input_shape(inputs.shape)
        # b: batch, i: input capsules, j: output capsules,
        # d: input capsule dim, z: output capsule dim
        # The votes are computed once, in the (b, j, i, z) layout where both
        # routing contractions are batched matrix products over (b, j) that
        # read the votes in place: no transposed copy per iteration.
        votes = ops.einsum("bid,idjz->bjiz", inputs, self.kernel)
        num_inputs = ops.shape(votes)[2]
        # (b, j, i): routing logits, per example, from the runtime batch.
        logits = ops.zeros((ops.shape(votes)[0], self.num_capsules,
                            num_inputs), dtype=votes.dtype)
        live_votes = votes
        projected = None
        if self.attention == "bilinear":
            # (b, i, d) @ (d, z) -> (b, i, z): u_i^T W_a / sqrt(d), in
            # float32 as the whole attention term (quadratic in the
            # inputs, it overflows float16).
            projected = ops.matmul(
                capsule_ops.at_least_float32(inputs),
                ops.cast(self.attention_kernel, "float32"),
            ) * self._inverse_sqrt_input_dim
        outputs = None
        for iteration in range(self.num_iterations):
            is_last = iteration == self.num_iterations - 1
            if self.stop_inner_gradients and not is_last:
                votes = ops.stop_gradient(live_votes)
            else:
                votes = live_votes
            if self.attention is None:
                routing_logits = logits
            else:
                # (b, j, i), float32
                attention = self._attention_logits(votes, projected, outputs)
                routing_logits = capsule_ops.at_least_float32(logits) + (
                    ops.cast(self.attention_weight, "float32") * attention)
            couplings = ops.cast(self._couplings(routing_logits),
                                 votes.dtype)  # (b, j, i)
            # (b, j, 1, i) @ (b, j, i, z) -> (b, j, z)
            weighted = ops.squeeze(
                ops.matmul(ops.expand_dims(couplings, 2), votes), 2)
            if self.bias is not None:
                weighted = weighted + ops.cast(self.bias, weighted.dtype)
            outputs = capsule_ops.squash(weighted, variant="sabour")
            if not is_last:
                # (b, j, i, z) @ (b, j, z, 1) -> (b, j, i)
                agreement = ops.squeeze(
                    ops.matmul(votes, ops.expand_dims(outputs, -1)), -1)
                logits = logits + agreement
        if return_couplings:
            return outputs, couplings
        return outputs

    def _attention_logits(self, votes, projected, outputs):
        """The attention term `a` (b, j, i) of the hybrid, in float32.

        `votes` (b, j, i, z); `projected` (b, i, z) the children times
        `W_a / sqrt(d)` (bilinear); `outputs` (b, j, z) the current parents,
        `None` before the first iteration (concat).
        """
        votes = capsule_ops.at_least_float32(votes)
        if self.attention == "bilinear":
            # (b, j, i, z) * (b, 1, i, z) summed over z -> (b, j, i)
            return ops.sum(votes * ops.expand_dims(projected, 1), axis=-1)
        kernel = ops.cast(self.attention_kernel, "float32")
        vote_kernel = kernel[:self.capsule_dim]  # (z,)
        output_kernel = kernel[self.capsule_dim:]  # (z,)
        # (b, j, i, z) @ (z, 1) -> (b, j, i)
        scores = ops.squeeze(
            ops.matmul(votes, ops.expand_dims(vote_kernel, -1)), -1)
        if outputs is not None:  # outputs = 0 before the first iteration
            # (b, j, z) @ (z, 1) -> (b, j, 1)
            scores = scores + ops.matmul(
                capsule_ops.at_least_float32(outputs),
                ops.expand_dims(output_kernel, -1))
        scores = scores + ops.cast(self.attention_bias, "float32")
        return ops.leaky_relu(scores, negative_slope=ATTENTION_LEAKY_SLOPE)

    def _couplings(self, logits):
        if not self.leaky:
            return self._tempered_softmax(logits, axis=1)
        leak = ops.zeros_like(logits[:, :1, :])  # (b, 1, i)
        couplings = self._tempered_softmax(
            ops.concatenate([leak, logits], axis=1), axis=1)
        return couplings[:, 1:, :]

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], self.num_capsules, self.capsule_dim)

    def compute_output_spec(self, inputs, return_couplings=False):
        outputs = keras.KerasTensor(self.compute_output_shape(inputs.shape),
                                    dtype=self.compute_dtype)
        if not return_couplings:
            return outputs
        couplings = keras.KerasTensor(
            (inputs.shape[0], self.num_capsules, inputs.shape[1]),
            dtype=self.compute_dtype)
        return outputs, couplings

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 3:
            raise ValueError(
                "`DynamicRouting` expects a 3-D input (batch, "
                "num_input_capsules, input_capsule_dim). Received: "
                f"input_shape={input_shape}")
        if not self.built:
            return
        expected = tuple(self.kernel.shape[:2])
        for received, built in zip(input_shape[1:], expected):
            if received is not None and received != built:
                raise ValueError(
                    "`DynamicRouting` was built for inputs of "
                    f"{expected[0]} capsules of dimension {expected[1]}, "
                    "expected an input of shape (batch, "
                    f"{expected[0]}, {expected[1]}). Received: "
                    f"input_shape={input_shape}")

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_capsules": self.num_capsules,
            "capsule_dim": self.capsule_dim,
            "num_iterations": self.num_iterations,
            "stop_inner_gradients": self.stop_inner_gradients,
            "leaky": self.leaky,
            "use_bias": self.use_bias,
            "temperature": self.temperature,
            "attention": self.attention,
            "attention_weight": self._initial_attention_weight,
            "attention_initializer":
                keras.initializers.serialize(self.attention_initializer),
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer":
                keras.initializers.serialize(self.bias_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ('kernel', 'bias')))
        return config

