import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_choice
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

AGREEMENT_SCALES = ("output_dim", "input_dim")


@keras_caps_export("keras_caps.layers.FCCaps")
class FCCaps(Router):
    """Fully connected capsules with Efficient-CapsNet self-attention routing.

    Each input capsule `i` votes for every output capsule `j` through its
    own matrix. A vote's weight comes from how well it agrees with all the
    votes for the same output (the row sum of the self-attention matrix);
    couplings are a softmax over the output capsules, a learned prior is
    added after the softmax, and the weighted votes are summed and squashed.
    There are no iterations.

    ```
    votes[j, i]     = inputs[i] @ kernel[j, i]                    # (D_out,)
    agreement[j, i] = <votes[j, i], sum_k votes[j, k]> / sqrt(D)
    couplings[:, i] = softmax(agreement[:, i] / temperature)      # over j
    outputs[j] = squash(sum_i (couplings[j, i] + prior[j, i]) * votes[j, i])
    ```

    `D` is the output capsule dimension, as in the official code, or the
    input capsule dimension (the paper's divisor) with
    `agreement_scale="input_dim"`. The weight layouts equal the official
    ones, so official weights load unchanged.

    Args:
        num_capsules: int. Number of output capsules.
        capsule_dim: int. Dimension of each output capsule.
        agreement_scale: str. `"output_dim"` divides the agreement by
            `sqrt(capsule_dim)`, as the official code does; `"input_dim"`
            by the square root of the input capsule dimension, as the paper
            does. Defaults to `"output_dim"`.
        kernel_initializer: Initializer for the vote matrices, shape
            `(num_capsules, num_input_capsules, input_dim, capsule_dim)`.
            Defaults to `"he_normal"`.
        prior_initializer: Initializer for the additive routing prior, shape
            `(num_capsules, num_input_capsules, 1)`. Defaults to `"zeros"`.
        kernel_regularizer: Regularizer for the vote matrices. Defaults to
            `None`.
        prior_regularizer: Regularizer for the routing prior. Defaults to
            `None`.
        kernel_constraint: Constraint for the vote matrices. Defaults to
            `None`.
        prior_constraint: Constraint for the routing prior. Defaults to
            `None`.
        temperature: float. Routing temperature, above 0: the couplings
            are `softmax(agreement / temperature)`. Held as a non-trainable
            variable (`layer.temperature = 0.5` changes it, also during
            `fit`). Defaults to `1.0`, the paper's routing.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape
            `(batch, num_input_capsules, input_capsule_dim)`.
        return_couplings: bool. Also return the coupling coefficients
            (before the prior is added), for analysis and routing maps.
            Defaults to `False`.

    Returns:
        Tensor of shape `(batch, num_capsules, capsule_dim)`; with
        `return_couplings=True`, a tuple `(outputs, couplings)` with
        couplings of shape `(batch, 1, num_input_capsules, num_capsules)`
        (the `Router` layout) that sum to 1 over the output capsules.
        `routing_trace` also returns the agreement and the votes.

    Example:

    >>> layer = keras_caps.layers.FCCaps(num_capsules=10, capsule_dim=16)
    >>> tuple(layer(np.zeros((2, 16, 8))).shape)
    (2, 10, 16)

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    """

    def __init__(self, num_capsules, capsule_dim, agreement_scale="output_dim",
                 kernel_initializer="he_normal", prior_initializer="zeros",
                 kernel_regularizer=None, prior_regularizer=None,
                 kernel_constraint=None, prior_constraint=None,
                 temperature=1.0, **kwargs):
        check_choice("agreement_scale", agreement_scale, AGREEMENT_SCALES)
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.agreement_scale = agreement_scale
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.prior_initializer = keras.initializers.get(prior_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            prior=(prior_regularizer, prior_constraint))
        self.input_spec = keras.InputSpec(ndim=3)

    keys_since_contract = ("temperature", "couplings_layout")
    vote_squash = "efficient"  # Mazzia et al. 2021.

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (j, i, d, z): votes contract the children's d.
        return {"kernel": (2,)}

    def build_router(self, input_shape):
        self.compute_output_shape(input_shape)  # Checks the rank.
        num_inputs, input_dim = input_shape[-2], input_shape[-1]
        if num_inputs is None or input_dim is None:
            raise ValueError(
                "`FCCaps` needs a known number of input capsules and input "
                "capsule dimension. Received: "
                f"input_shape={tuple(input_shape)}")
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.num_capsules, num_inputs, input_dim, self.capsule_dim),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        self.prior = self.add_weight(
            name="prior",
            shape=(self.num_capsules, num_inputs, 1),
            initializer=self.prior_initializer,
            regularizer=self.prior_regularizer,
            constraint=self.prior_constraint)
        if self.agreement_scale == "output_dim":
            scale_dim = self.capsule_dim
        else:
            scale_dim = input_dim
        self._inverse_sqrt_dim = 1.0 / math.sqrt(scale_dim)
        self.input_spec = keras.InputSpec(
            ndim=3, axes={-2: num_inputs, -1: input_dim})

    def compute_routing(self, inputs, keep_passes=False):
        # b: batch, i: input capsules, j: output capsules,
        # d: input capsule dim, z: output capsule dim
        votes = ops.einsum("bid,jidz->bjiz", inputs,
                           self.kernel_value("kernel"))
        # The agreement, a sum of products of votes, overflows float16 for
        # large inputs: the vote total, the agreement and its softmax are
        # float32.
        wide_votes = capsule_ops.at_least_float32(votes)
        total = ops.sum(wide_votes, axis=2, keepdims=True)  # (b, j, 1, z)
        agreement = ops.sum(wide_votes * total, axis=-1)  # (b, j, i)
        agreement = agreement * self._inverse_sqrt_dim
        couplings = self.tempered_softmax(agreement, axis=1)  # over j
        # (b, j, i): the prior is added after the softmax, as in the
        # official code.
        routing_weights = ops.cast(couplings, votes.dtype) + ops.squeeze(
            self.prior, -1)
        # (b, j, z)
        outputs = ops.einsum("bji,bjiz->bjz", routing_weights, votes)
        outputs = capsule_ops.squash(outputs, variant="efficient")
        # (b, j, i) -> (b, 1, i, j), the `Router` layout
        return RoutingPasses(
            outputs=outputs,
            couplings=[ops.expand_dims(ops.transpose(couplings, (0, 2, 1)),
                                       1)],
            agreement=[ops.expand_dims(ops.transpose(agreement, (0, 2, 1)),
                                       1)],
            votes=ops.transpose(votes, (0, 2, 1, 3)) if keep_passes else None)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                "`FCCaps` expects a 3-D input (batch, num_input_capsules, "
                "input_capsule_dim). Received: "
                f"input_shape={tuple(input_shape)}")
        return (input_shape[0], self.num_capsules, self.capsule_dim)

    def compute_couplings_shape(self, input_shape):
        return (input_shape[0], 1, input_shape[1], self.num_capsules)

    def get_config(self):
        config = super().get_config()
        config.update({
            "agreement_scale": self.agreement_scale,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "prior_initializer":
                keras.initializers.serialize(self.prior_initializer),
        })
        config.update(
            serialize_regularizers_and_constraints(self, ('kernel', 'prior')))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per child `i` and parent `j` (Mazzia et al., 2021, self-attention
        routing): the vote, `input_dim * capsule_dim`; its agreement with
        the vote total, `capsule_dim`; its weighted sum, `capsule_dim`.
        """
        input_dim = int(input_shape[-1])
        return self._child_parent_pairs(input_shape) * self.capsule_dim * (
            input_dim + 2)
