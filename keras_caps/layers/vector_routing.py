import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_bool
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

_LAYER_NORM_EPSILON = 1e-5


@keras_caps_export("keras_caps.layers.VectorRouting")
class VectorRouting(Router):
    """Heinsen's routing of a sequence of vectors to a set of output vectors.

    Each input `i` may contribute a share `g_i` of its data; each output
    `j` votes `V[i, j]` for every input and predicts the inputs, and the
    inputs split their share between the outputs that predict them best.
    The credit `phi[i, j]` is the benefit of using the data minus the cost
    of ignoring it (Heinsen, 2022, Algorithm 1):

    ```
    x~ = x / sqrt(m);  g = sigmoid(x~ . W_A + B_A)    # m: present inputs
    for t in 1..num_iterations:
      E:  R = uniform if t == 1, else softmax_j(S(x, N(x_out)) / temperature)
      D:  D_use = g * R;  D_ign = g - D_use
      M:  phi = beta_use * D_use - beta_ign * D_ign            (n, n_out)
          x_out[j] = sum_i phi[i, j] * ((x~[i] * W_F1[j]) @ W_F2 + B_F2[j])
    x_out = N(x_out) if normalize          # N: LayerNorm without affine
    ```

    Inputs `(batch, n, d_in)` map to outputs `(batch, num_capsules,
    capsule_dim)`. `mask` (True = present) removes padded inputs and
    `routing_mask` (True = may route) restricts pairs. Weight names, the
    memory-efficient M-step, masks and variable length are explained in
    `docs/routing/vector_routing.md`.

    Args:
        num_capsules: int. Number of output vectors, at least 2.
        capsule_dim: int. Size of each output vector.
        num_inputs: int or `None`. Fixed number of inputs, or `None` for a
            variable number. Defaults to `None`.
        num_iterations: int. E-D-M iterations. Defaults to `2`.
        normalize: bool. Apply `N` to the outputs. Defaults to `True`.
        memory_efficient: bool. Contract over the inputs first and never
            build the vote tensor. Defaults to `True`.
        kernel_regularizer: Regularizer for every weight but the biases.
            Defaults to `None`.
        bias_regularizer: Regularizer for the biases. Defaults to `None`.
        kernel_constraint: Constraint for every weight but the biases.
            Defaults to `None`.
        bias_constraint: Constraint for the biases. Defaults to `None`.
        temperature: float. Temperature of the E-step, above 0: the shares
            are `softmax_j(S / temperature)` of the log-similarities `S`
            (over each input's allowed outputs under a `routing_mask`). It
            sharpens or spreads the shares only: the D- and M-steps and
            the uniform first E-step do not change, so with
            `num_iterations=1` it has no effect. Held as a non-trainable
            variable (`layer.temperature = 0.5` changes it, also during
            `fit`). Defaults to `1.0`, Heinsen's routing.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: Tensor of shape `(batch, num_inputs, input_dim)`.
        mask: Optional boolean `(batch, num_inputs)`, True where present.
        routing_mask: Optional boolean `(num_inputs, num_capsules)` or
            `(batch, num_inputs, num_capsules)`, True where `i` may route
            to `j`.
        return_couplings: bool. Also return the shares `R` of the last
            E-step in the `Router` layout `(batch, 1, num_inputs,
            num_capsules)`: probabilities over each input's (allowed)
            outputs, all zero for an input with none. Defaults to
            `False`.
        return_credit: bool. Also return the signed credit `phi` of the
            last iteration, `(batch, num_inputs, num_capsules)`. Defaults
            to `False`.

    Returns:
        The outputs; with `return_couplings` and/or `return_credit`, a
        tuple `(outputs, couplings, phi)` of what was asked, in that
        order. Compose the `phi` of stacked routings with
        `keras_caps.ops.compose_credit_assignments`.

    Example:

    >>> layer = keras_caps.layers.VectorRouting(num_capsules=4,
    ...                                         capsule_dim=8)
    >>> outputs, phi = layer(np.ones((2, 30, 16)), return_credit=True)
    >>> tuple(outputs.shape), tuple(phi.shape)
    ((2, 4, 8), (2, 30, 4))

    Reference:
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754)
    """

    def __init__(self, num_capsules, capsule_dim, num_inputs=None,
                 num_iterations=2, normalize=True, memory_efficient=True,
                 kernel_regularizer=None, bias_regularizer=None,
                 kernel_constraint=None, bias_constraint=None,
                 temperature=1.0, **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        if num_capsules < 2:
            raise ValueError(
                "Received an invalid value for `num_capsules`, expected an "
                "integer of at least 2 (outputs compete for each input's "
                f"data). Received: num_capsules={num_capsules!r}")
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        if num_inputs is not None:
            num_inputs = check_positive_int("num_inputs", num_inputs)
        num_iterations = check_positive_int("num_iterations", num_iterations)
        check_bool("normalize", normalize)
        check_bool("memory_efficient", memory_efficient)
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.num_inputs = num_inputs
        self.num_iterations = num_iterations
        self.normalize = normalize
        self.memory_efficient = memory_efficient
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint),
            bias=(bias_regularizer, bias_constraint))
        self.supports_masking = True
        self.input_spec = keras.InputSpec(ndim=3)

    keys_since_contract = ("temperature", "couplings_layout")

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (j, d): one scale per parent.
        return {"vote_scale": (1,)}

    def build_router(self, input_shape):
        input_dim = self._check_input_shape(input_shape)
        num_rows = self.num_inputs or 1
        num_outputs, output_dim = self.num_capsules, self.capsule_dim
        kernel, bias = self._kernel_weight, self._bias_weight
        self.score_kernel = kernel("score_kernel", (num_rows, input_dim),
                                   _normal(2.0 / math.sqrt(input_dim)))
        self.score_bias = bias("score_bias", (num_rows,))
        self.vote_scale = kernel("vote_scale", (num_outputs, input_dim),
                                 _normal(1.0))
        self.vote_kernel = kernel("vote_kernel", (input_dim, output_dim),
                                  _normal(2.0 / math.sqrt(input_dim)))
        self.vote_bias = bias("vote_bias", (num_outputs, output_dim))
        if self.num_iterations > 1:
            # G and S are used from the second E-step on; with a single
            # iteration they would never receive gradients.
            self.prediction_kernel = kernel(
                "prediction_kernel", (output_dim, input_dim),
                _normal(1.0 / math.sqrt(output_dim)))
            self.prediction_scale = kernel(
                "prediction_scale", (num_outputs, input_dim), _normal(1.0))
            self.prediction_bias = bias(
                "prediction_bias", (num_outputs, input_dim))
            self.similarity_scale = kernel(
                "similarity_scale", (num_rows, num_outputs),
                _normal(1.0 / math.sqrt(input_dim)))
            self.similarity_bias = bias(
                "similarity_bias", (num_rows, num_outputs))
        self._build_benefits_and_costs(input_dim)
        axes = {-1: input_dim}
        if self.num_inputs is not None:
            axes[-2] = self.num_inputs
        self.input_spec = keras.InputSpec(ndim=3, axes=axes)

    def _build_benefits_and_costs(self, input_dim):
        """`beta_use` and `beta_ign`: weights, or a linear map of inputs."""
        num_outputs = self.num_capsules
        kernel, bias = self._kernel_weight, self._bias_weight
        if self.num_inputs is not None:
            self.use_benefit = kernel(
                "use_benefit", (self.num_inputs, num_outputs), _normal(1.0))
            self.ignore_cost = kernel(
                "ignore_cost", (self.num_inputs, num_outputs), _normal(1.0))
            return
        # PyTorch's `Linear` default, as in the reference.
        limit = 1.0 / math.sqrt(input_dim)

        def uniform():
            return keras.initializers.RandomUniform(-limit, limit)

        self.use_benefit_kernel = kernel(
            "use_benefit_kernel", (input_dim, num_outputs), uniform())
        self.use_benefit_bias = bias(
            "use_benefit_bias", (num_outputs,), uniform())
        self.ignore_cost_kernel = kernel(
            "ignore_cost_kernel", (input_dim, num_outputs), uniform())
        self.ignore_cost_bias = bias(
            "ignore_cost_bias", (num_outputs,), uniform())

    def _kernel_weight(self, name, shape, initializer):
        return self.add_weight(
            name=name, shape=shape, initializer=initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)

    def _bias_weight(self, name, shape, initializer="zeros"):
        return self.add_weight(
            name=name, shape=shape, initializer=initializer,
            regularizer=self.bias_regularizer,
            constraint=self.bias_constraint)

    def call(self, inputs, mask=None, routing_mask=None,
             return_couplings=False, return_credit=False):
        passes = self.compute_routing(inputs, mask=mask,
                                      routing_mask=routing_mask)
        results = self.routing_outputs(passes, return_couplings)
        if not return_credit:
            return results
        if not isinstance(results, tuple):
            results = (results,)
        return (*results, passes.extras["credit"])

    def compute_routing(self, inputs, keep_passes=False, mask=None,
                        routing_mask=None):
        self._check_masks(inputs.shape, mask, routing_mask)
        # b: batch, i: inputs, j: outputs (capsules),
        # d: input dim, h: output dim (capsule_dim)
        inputs, allowed, scale = self._present_inputs(inputs, mask,
                                                      routing_mask)
        scaled_inputs = inputs * scale  # (b, i, d)
        use_benefit, ignore_cost = self._benefits_and_costs(inputs)
        # (b, i): score of each input; (b, i, 1) or (b, i, j) usable share
        scores = ops.sum(scaled_inputs * self.score_kernel, axis=-1)
        scores = scores + self.score_bias
        usable = ops.sigmoid(scores)[..., None]
        if allowed is not None:
            usable = usable * allowed
        votes = None
        if not self.memory_efficient:
            # (b, i, j, h): Algorithm 1's vote tensor, built once.
            votes = ops.einsum("bid,jd->bijd", scaled_inputs,
                               self.kernel_value("vote_scale"))
            votes = ops.matmul(votes, self.vote_kernel) + self.vote_bias
        outputs = None
        shares_passes, similarity_passes, output_passes = [], [], []
        for iteration in range(self.num_iterations):
            # E-step: the share of each input that each output claims.
            shares, similarities = self._shares(inputs, outputs, allowed,
                                                iteration)
            if keep_passes or iteration == self.num_iterations - 1:
                shares_passes.append(shares)
                similarity_passes.append(similarities)
            # D-step: data used and ignored by each output.
            used = usable * ops.cast(shares, usable.dtype)  # (b, i, j)
            ignored = usable - used  # (b, i, j)
            # M-step: credit assignments and outputs.
            credit = use_benefit * used - ignore_cost * ignored  # (b, i, j)
            outputs = self._maximization_step(credit, scaled_inputs, votes)
            if keep_passes or iteration == self.num_iterations - 1:
                output_passes.append(outputs)
        if self.normalize:
            output_passes = [self._layer_norm(o) for o in output_passes]
        return RoutingPasses(
            outputs=output_passes[-1], parents=output_passes,
            couplings=[ops.expand_dims(shares, 1) for shares in shares_passes],
            agreement=[ops.expand_dims(s, 1) for s in similarity_passes],
            extras={"credit": credit})

    def _present_inputs(self, inputs, mask, routing_mask):
        """The inputs (padding zeroed), the allowed routes and `1/sqrt(m)`.

        `allowed` is `None` or float `(b, i, j)`, 1 where `i` may route to
        `j`; the scale is `(b, 1, 1)`.
        """
        dtype = inputs.dtype
        allowed = None
        if mask is not None:
            # Padded inputs are zeroed (they may hold anything, even NaN)
            # and not counted; the count is float32, exact beyond 2048.
            inputs = ops.where(mask[..., None], inputs, 0.0)
            num_present = ops.sum(ops.cast(mask, "float32"), axis=1)  # (b,)
            num_present = ops.maximum(num_present, 1.0)
            allowed = ops.cast(mask, dtype)[..., None] * ops.ones(
                (self.num_capsules,), dtype)  # (b, i, j)
        else:
            num_present = ops.cast(ops.shape(inputs)[1], "float32")
        if routing_mask is not None:
            routes = ops.cast(routing_mask, dtype)
            if len(routes.shape) == 2:
                routes = routes[None]
            allowed = routes if allowed is None else allowed * routes
        scale = ops.cast(ops.reshape(ops.rsqrt(num_present), (-1, 1, 1)),
                         dtype)
        return inputs, allowed, scale

    def _benefits_and_costs(self, inputs):
        """`beta_use` and `beta_ign`: weights, or `(b, i, j)` from inputs."""
        if self.num_inputs is not None:
            return self.use_benefit, self.ignore_cost
        # (b, i, j), from the unscaled inputs
        use_benefit = ops.matmul(inputs, self.use_benefit_kernel)
        use_benefit = use_benefit + self.use_benefit_bias
        ignore_cost = ops.matmul(inputs, self.ignore_cost_kernel)
        ignore_cost = ignore_cost + self.ignore_cost_bias
        return use_benefit, ignore_cost

    def _shares(self, inputs, outputs, allowed, iteration):
        """The E-step: float32 shares `R` and log-similarities (b, i, j)."""
        if iteration > 0:
            return self._expectation_step(inputs, outputs, allowed)
        batch_and_inputs = ops.shape(inputs)[:2]
        zeros = ops.zeros((*batch_and_inputs, self.num_capsules), "float32")
        if allowed is None:
            return zeros + 1.0 / self.num_capsules, zeros
        # Uniform over each input's allowed outputs.
        allowed = ops.cast(allowed, "float32")
        shares = allowed / ops.maximum(
            ops.sum(allowed, axis=-1, keepdims=True), 1.0)
        return zeros + shares, zeros  # a (1, i, j) routing mask: per example

    def _maximization_step(self, credit, scaled_inputs, votes):
        """The outputs `(b, j, h)` from the credit `phi` `(b, i, j)`."""
        if votes is not None:
            return ops.einsum("bij,bijh->bjh", credit, votes)
        # (b, j, d): contract over the inputs first.
        summed = ops.einsum("bij,bid->bjd", credit, scaled_inputs)
        outputs = ops.matmul(summed * self.kernel_value("vote_scale"),
                             self.vote_kernel)  # (b, j, h)
        total_credit = ops.sum(credit, axis=1)  # (b, j)
        return outputs + total_credit[..., None] * self.vote_bias

    def _expectation_step(self, inputs, outputs, allowed):
        """Float32 shares `R` and log-similarities `S`, both (b, i, j).

        How well each output predicts each input; the similarity, a sum
        over the input dimension, is float32 under mixed precision.
        """
        # (b, j, d): each output's prediction of the inputs
        predictions = ops.matmul(self._layer_norm(outputs),
                                 self.prediction_kernel)
        predictions = predictions * self.prediction_scale
        predictions = predictions + self.prediction_bias
        # (b, i, j): log-similarities, from the unscaled inputs
        similarities = ops.einsum(
            "bid,bjd->bij", capsule_ops.at_least_float32(inputs),
            capsule_ops.at_least_float32(predictions))
        similarities = similarities * ops.cast(self.similarity_scale,
                                               "float32")
        similarities = ops.log_sigmoid(
            similarities + ops.cast(self.similarity_bias, "float32"))
        if allowed is None:
            return self.tempered_softmax(similarities, axis=-1), similarities
        # Exact masked softmax over j without large constants: disallowed
        # entries are replaced by the row minimum, so the shift is the
        # maximum over allowed entries (any finite value for an input with
        # no allowed output); every exponent is <= 0 and an allowed row
        # sums to >= 1, so dividing by the sum (by 1 where it is 0) is
        # exact and an input with no allowed output gets all-zero shares.
        # In float32, with the temperature dividing the shifted logits
        # (<= 0), so a tiny temperature gives one-hot shares, not NaN; the
        # gradient of a one-hot row cancels exactly (`maximum(sum, 1)`
        # would split it at sum = 1 on JAX, and 1 / temperature would blow
        # the remainder up).
        is_allowed = allowed > 0.0
        row_min = ops.min(similarities, axis=-1, keepdims=True)
        filled = ops.where(is_allowed, similarities, row_min)
        shift = ops.stop_gradient(ops.max(filled, axis=-1, keepdims=True))
        weights = ops.where(
            is_allowed, ops.exp(self.temper(filled - shift)), 0.0)
        total = ops.sum(weights, axis=-1, keepdims=True)
        total = ops.where(total > 0.0, total, 1.0)
        return weights / total, similarities

    def _layer_norm(self, x):
        """LayerNorm over the last axis without affine, in float32."""
        if self.capsule_dim == 1:
            return x
        dtype = x.dtype
        x = capsule_ops.at_least_float32(x)
        mean = ops.mean(x, axis=-1, keepdims=True)
        centred = x - mean
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
        normalized = centred * ops.rsqrt(variance + _LAYER_NORM_EPSILON)
        return ops.cast(normalized, dtype)

    def _check_input_shape(self, input_shape):
        """Validates a 3-D input shape; returns the input dimension."""
        input_shape = tuple(input_shape)
        if len(input_shape) != 3:
            raise ValueError(
                "`VectorRouting` expects a 3-D input (batch, num_inputs, "
                f"input_dim). Received: input_shape={input_shape}")
        num_inputs, input_dim = input_shape[1], input_shape[2]
        if input_dim is None:
            raise ValueError(
                "`VectorRouting` needs a known input dimension (the last "
                f"axis). Received: input_shape={input_shape}")
        if self.num_inputs is not None and num_inputs != self.num_inputs:
            raise ValueError(
                "`VectorRouting` was created with a fixed number of inputs, "
                f"num_inputs={self.num_inputs}, but the input has "
                f"{num_inputs} along axis 1. Pass inputs of that length, or "
                "create the layer with `num_inputs=None` for a variable "
                f"number of inputs. Received: input_shape={input_shape}")
        return input_dim

    def _check_masks(self, input_shape, mask, routing_mask):
        num_inputs = input_shape[1]
        if mask is not None:
            _check_bool_tensor("mask", mask)
            shape = tuple(mask.shape)
            if len(shape) != 2 or not _compatible(
                    shape, (input_shape[0], num_inputs)):
                raise ValueError(
                    "`mask` must be a boolean tensor of shape (batch, "
                    f"num_inputs) = {(input_shape[0], num_inputs)}, True for "
                    f"present inputs. Received: mask.shape={shape}")
        if routing_mask is not None:
            _check_bool_tensor("routing_mask", routing_mask)
            shape = tuple(routing_mask.shape)
            expected = (num_inputs, self.num_capsules)
            if len(shape) == 3:
                expected = (input_shape[0],) + expected
            if len(shape) not in (2, 3) or not _compatible(shape, expected):
                raise ValueError(
                    "`routing_mask` must be a boolean tensor of shape "
                    f"(num_inputs, num_capsules) = {expected[-2:]} or "
                    "(batch, num_inputs, num_capsules), True where input i "
                    "may route to output j. Received: "
                    f"routing_mask.shape={shape}")

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], self.num_capsules, self.capsule_dim)

    def compute_output_spec(self, inputs, mask=None, routing_mask=None,
                            return_couplings=False, return_credit=False):
        self._check_masks(inputs.shape, mask, routing_mask)
        results = super().compute_output_spec(
            inputs, return_couplings=return_couplings)
        if not return_credit:
            return results
        if not isinstance(results, tuple):
            results = (results,)
        # phi: (batch, num_inputs, num_capsules)
        credit = keras.KerasTensor(
            (inputs.shape[0], inputs.shape[1], self.num_capsules),
            dtype=self.compute_dtype)
        return (*results, credit)

    def compute_couplings_shape(self, input_shape):
        return (input_shape[0], 1, input_shape[1], self.num_capsules)

    def compute_mask(self, inputs, mask=None):
        # The outputs are a set of capsules, none of them padding.
        return None

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_inputs": self.num_inputs,
            "num_iterations": self.num_iterations,
            "normalize": self.normalize,
            "memory_efficient": self.memory_efficient,
        })
        config.update(
            serialize_regularizers_and_constraints(self, ("kernel", "bias")))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Algorithm 1 of Heinsen (2022) with the votes built (the count does
        not depend on `memory_efficient`), `n` inputs of size `d`, `m`
        outputs of size `h`: the votes `(x~_i * W_F1[j]) @ W_F2`, `n m d h`
        (the elementwise scale counts nothing); the shares `x~ . W_A`,
        `n d`; `beta_use` and `beta_ign` from the inputs (when
        `num_inputs` is `None`), `2 n d m`; per iteration the M-step's
        weighted sum, `n m h`; per E-step after the first, the
        predictions `N(x_out) @ W_G`, `m h d`, and the similarities,
        `n m d`.
        """
        num_inputs = input_shape[-2]
        if num_inputs is None:
            raise ValueError(
                "`VectorRouting.multiply_adds` needs a known number of "
                "inputs. Received: "
                f"input_shape={tuple(input_shape)}")
        n, d = int(num_inputs), int(input_shape[-1])
        m, h = self.num_capsules, self.capsule_dim
        count = n * m * d * h + n * d + self.num_iterations * n * m * h
        if self.num_inputs is None:
            count += 2 * n * d * m
        return count + (self.num_iterations - 1) * (m * h * d + n * m * d)



def _normal(stddev):
    return keras.initializers.RandomNormal(stddev=stddev)


def _check_bool_tensor(name, value):
    dtype = getattr(value, "dtype", None)
    dtype = (type(value).__name__ if dtype is None
             else keras.backend.standardize_dtype(dtype))
    if dtype != "bool":
        raise TypeError(
            f"`{name}` must be a boolean tensor (True = "
            f"{'present' if name == 'mask' else 'may route'}). Cast it with "
            f"`keras.ops.cast({name}, 'bool')`. "
            f"Received: {name}.dtype={dtype}")


def _compatible(shape, expected):
    if len(shape) != len(expected):
        return False
    return all(a is None or b is None or a == b
               for a, b in zip(shape, expected, strict=True))
