import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.dynamic_routing import DynamicRouting
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_choice
from keras_caps.validation import check_number

ATTENTION_FORMS = ("bilinear", "concat")
# The negative slope of the concatenation form's LeakyReLU, as in graph
# attention networks (Velickovic et al., 2018), whose scores it follows.
ATTENTION_LEAKY_SLOPE = 0.2


@keras_caps_export("keras_caps.layers.HybridRouting")
class HybridRouting(DynamicRouting):
    """Routing-by-agreement plus a learned attention term (a hybrid).

    `DynamicRouting` whose routing logits take an attention term `a`
    weighted by a learned scalar `lambda`; the temperature divides the
    whole logit:

    ```
    couplings[i, :] = softmax((logits[i, :] + lambda * a[i, :]) / temperature)
    bilinear: a[i, j] = inputs[i] @ W_a @ votes[i, j] / sqrt(D_in)
    concat:   a[i, j] = LeakyReLU(w_a @ [votes[i, j]; outputs[j]] + b_a)
    ```

    `W_a` is `(D_in, D_out)`, so the bilinear score is a `D_in`-dimensional
    dot product, scaled as in scaled dot-product attention (Vaswani et al.,
    2017, Section 3.2.1); it compares a child with its own vote, so it is
    the same in every iteration and computed once per call. The
    concatenation score (the form of graph attention networks, Velickovic
    et al., 2018, Eq. 3, LeakyReLU slope 0.2) compares a vote with the
    current parent output: its vote half is computed once, its parent half
    each iteration, with `outputs = 0` before the first. With `lambda = 0`
    the couplings and outputs are bit-identical to plain routing, and the
    default initial `attention_weight=0.0` starts training from there.
    With `stop_inner_gradients=True` the attention term reads the same
    (stopped) votes as the agreement in the inner iterations. `coupling`
    replaces the softmax of the whole tempered logit by sparsemax,
    entmax-1.5, sigmoid gates or a straight-through Gumbel-softmax sample
    (see `Router.normalize_couplings`).

    Args:
        num_capsules: int. Number of output (parent) capsules.
        capsule_dim: int. Dimension of each output capsule.
        attention: `"bilinear"` or `"concat"`: the attention term (above).
        attention_weight: float. Initial value of the learned scalar
            `lambda` (after `build`, `layer.attention_weight_variable`
            holds it and `layer.attention_weight` reads it). Defaults to
            `0.0` (training starts from plain routing).
        attention_initializer: Initializer for `W_a` (bilinear) or `w_a`
            (concat); `b_a` starts at zero. Defaults to `"glorot_uniform"`.
        **kwargs: The other arguments of `DynamicRouting` (iterations,
            bias, leaky routing, initializers, temperature, `coupling`,
            `name`, ...).

    Call arguments:
        inputs: Tensor of shape
            `(batch, num_input_capsules, input_capsule_dim)`.
        return_couplings: bool. Also return the last iteration's couplings
            `(batch, 1, num_input_capsules, num_capsules)`. Defaults to
            `False`.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`, or
        `(outputs, couplings)`.

    Example:

    >>> layer = keras_caps.layers.HybridRouting(
    ...     num_capsules=10, capsule_dim=16, attention="bilinear")
    >>> tuple(layer(np.zeros((2, 32, 8))).shape)
    (2, 10, 16)

    Reference:
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    - [Velickovic et al., 2018](https://arxiv.org/abs/1710.10903)
    """

    # Added with the router contract: no config of before holds it.
    keys_since_contract = ()

    def __init__(self, num_capsules, capsule_dim, attention="bilinear",
                 attention_weight=0.0,
                 attention_initializer="glorot_uniform", **kwargs):
        check_choice("attention", attention, ATTENTION_FORMS)
        attention_weight = check_number("attention_weight", attention_weight)
        if not math.isfinite(attention_weight):
            raise ValueError(
                "Received an invalid value for `attention_weight`, expected "
                "a finite number. Received: "
                f"attention_weight={attention_weight!r}")
        super().__init__(num_capsules, capsule_dim, **kwargs)
        self.attention = attention
        self.initial_attention_weight = attention_weight
        self.attention_initializer = keras.initializers.get(
            attention_initializer)
        self.attention_kernel = None
        self.attention_bias = None
        self.attention_weight_variable = None

    @property
    def attention_weight(self):
        """The current `lambda`, a Python float."""
        if self.attention_weight_variable is None:
            return self.initial_attention_weight
        return float(ops.convert_to_numpy(self.attention_weight_variable))

    def build_router(self, input_shape):
        super().build_router(input_shape)
        input_dim = input_shape[-1]
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
        self.attention_weight_variable = self.add_weight(
            name="attention_weight", shape=(),
            initializer=keras.initializers.Constant(
                self.initial_attention_weight))

    def extra_logits(self, inputs, wide_votes):
        scale = ops.cast(self.attention_weight_variable, "float32")
        if self.attention == "bilinear":
            scores = self._bilinear_scores(inputs, wide_votes)
            return lambda outputs, stopped: scale * scores[stopped]
        vote_scores = self._concat_vote_scores(wide_votes)
        kernel = ops.cast(self.attention_kernel, "float32")
        output_kernel = ops.expand_dims(kernel[self.capsule_dim:], -1)
        bias = ops.cast(self.attention_bias, "float32")

        def concat_logits(outputs, stopped):
            scores = vote_scores[stopped]  # (b, j, i)
            if outputs is not None:  # outputs = 0 before the first
                # (b, j, z) @ (z, 1) -> (b, j, 1)
                scores = scores + ops.matmul(
                    capsule_ops.at_least_float32(outputs), output_kernel)
            scores = scores + bias
            return scale * ops.leaky_relu(
                scores, negative_slope=ATTENTION_LEAKY_SLOPE)

        return concat_logits

    def _bilinear_scores(self, inputs, wide_votes):
        """`{stopped: (b, j, i)}` bilinear scores, from live/stopped votes."""
        # (b, i, d) @ (d, z) -> (b, i, z): u_i^T W_a / sqrt(d), in float32
        # (quadratic in the inputs, the term overflows float16).
        projected = ops.matmul(
            capsule_ops.at_least_float32(inputs),
            ops.cast(self.attention_kernel, "float32"),
        ) * self._inverse_sqrt_input_dim
        projected = ops.expand_dims(projected, 1)  # (b, 1, i, z)
        # (b, j, i, z) * (b, 1, i, z) summed over z -> (b, j, i)
        scores = {False: ops.sum(wide_votes * projected, axis=-1)}
        if self.stop_inner_gradients:
            scores[True] = ops.sum(
                ops.stop_gradient(wide_votes) * projected, axis=-1)
        return scores

    def _concat_vote_scores(self, wide_votes):
        """`{stopped: (b, j, i)}` vote halves `w_a[:z] . votes[i, j]`."""
        kernel = ops.cast(self.attention_kernel, "float32")
        vote_kernel = ops.expand_dims(kernel[:self.capsule_dim], -1)
        # (b, j, i, z) @ (z, 1) -> (b, j, i)
        scores = {False: ops.squeeze(ops.matmul(wide_votes, vote_kernel), -1)}
        if self.stop_inner_gradients:
            scores[True] = ops.squeeze(ops.matmul(
                ops.stop_gradient(wide_votes), vote_kernel), -1)
        return scores

    def get_config(self):
        config = super().get_config()
        config.update({
            "attention": self.attention,
            "attention_weight": self.initial_attention_weight,
            "attention_initializer":
                keras.initializers.serialize(self.attention_initializer),
        })
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        `DynamicRouting`'s, plus the attention term: bilinear, the
        projection `u_i^T W_a` (`input_dim * capsule_dim` per child) and
        its dot product with each vote (`capsule_dim` per child and
        parent), once; concat, `w_a[:z] . u_j|i` (`capsule_dim` per child
        and parent) once and `w_a[z:] . v_j` (`capsule_dim` per parent)
        in every iteration after the first.
        """
        count = super().multiply_adds(input_shape)
        pairs = self._child_parent_pairs(input_shape)
        if self.attention == "bilinear":
            num_inputs, input_dim = int(input_shape[-2]), int(input_shape[-1])
            return count + (num_inputs * input_dim + pairs) * self.capsule_dim
        return count + (pairs + (self.num_iterations - 1)
                        * self.num_capsules) * self.capsule_dim
