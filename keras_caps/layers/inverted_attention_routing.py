import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_choice
from keras_caps.validation import check_int_pair
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

POSES = ("matrix", "vector")


@keras_caps_export("keras_caps.layers.InvertedAttentionRouting")
class InvertedAttentionRouting(Router):
    """Capsule layer with inverted dot-product attention routing (Tsai et al.).

    Children vote for parents; a vote's weight is the softmax over the
    **parents** of its agreement with the parent pose, and the parents are
    the LayerNorm of their weighted votes. The first pass is uniform (Tsai
    et al., 2020, Section 2 and Procedure 1):

    ```
    votes[i, j]     = pose[i] @ kernel[i, j]    # s x s matrices, or vectors
    parents[j]      = LayerNorm(sum_i votes[i, j] / num_capsules)
    repeat num_iterations - 1 times:
        couplings[i, :] = softmax_j(<parents[j], votes[i, j]>
                                    / (sqrt(d) * temperature))
        parents[j]      = LayerNorm(sum_i couplings[i, j] * votes[i, j])
    ```

    Shapes: `kernel_size=None` maps `(batch, N, D_in)` (or a capsule map
    `(batch, H, W, N, D_in)`, all children) to `(batch, num_capsules, d)`;
    `kernel_size=k` maps `(batch, H, W, N, D_in)` to `(batch, H', W',
    num_capsules, d)`, `H' = (H - k) // strides + 1`, each `k x k` window
    routing to the parents at its position. `votes` and `route` run single
    passes (see `InvertedAttentionRoutingStack`). Details and derivations:
    `docs/routing/inverted_attention_routing.md`.

    Args:
        num_capsules: int. Parent capsules (types, per position).
        capsule_dim: int. Pose size `d`; a perfect square for matrix poses.
        kernel_size: `None`, or an int or 2 ints: the window of the
            convolutional form. Defaults to `None`.
        strides: int or 2 ints. Window strides; `1` when fully connected.
            Defaults to `1`.
        pose: str. `"matrix"` (the paper's) or `"vector"`. Matrix poses
            need `D_in = d`. Defaults to `"matrix"`.
        num_iterations: int. Passes, counting the uniform one. Defaults to
            `2`, the paper's CIFAR runs.
        dropout: float. Dropout before the LayerNorm. Defaults to `0.0`.
        epsilon: float. LayerNorm epsilon. Defaults to `1e-5`.
        kernel_initializer: Initializer for the vote transforms. Defaults
            to `None`, the official `RandomNormal` scale.
        kernel_regularizer: Regularizer for them. Defaults to `None`.
        kernel_constraint: Constraint for them. Defaults to `None`.
        temperature: float. Routing temperature of the agreement passes,
            above 0: the couplings are `softmax_j(agreement / temperature)`
            (the uniform first pass has none). Held as a non-trainable
            variable (`layer.temperature = 0.5` changes it, also during
            `fit`). Defaults to `1.0`, the paper's routing.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The child capsules.
        parents: Optional current parent poses, of the output shape: run
            one agreement pass against them. Defaults to `None`.
        training: bool. Whether dropout is active.
        return_couplings: bool. Also return the last pass's couplings in
            the `Router` layout `(batch, 1, children, num_capsules)`,
            summing to 1 over the parents. Fully connected, `children` are
            the input capsules (`H * W * N` for a capsule map, row-major);
            convolutional, they are the (output position, window offset,
            child type) triples, `H' * W' * k * k * N` of them in
            row-major order, each routing to the `num_capsules` parents at
            its output position. Defaults to `False`.

    Returns:
        The parent poses, or `(poses, couplings)`.

    Example:

    >>> layer = keras_caps.layers.InvertedAttentionRouting(
    ...     num_capsules=4, capsule_dim=4, kernel_size=3, strides=2)
    >>> tuple(layer(np.zeros((2, 7, 7, 3, 4))).shape)
    (2, 3, 3, 4, 4)

    Reference:
    - [Tsai et al., 2020](https://arxiv.org/abs/2002.04764)
    """

    def __init__(self, num_capsules, capsule_dim, kernel_size=None, strides=1,
                 pose="matrix", num_iterations=2, dropout=0.0, epsilon=1e-5,
                 kernel_initializer=None, kernel_regularizer=None,
                 kernel_constraint=None, temperature=1.0, **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        if kernel_size is not None:
            kernel_size = check_int_pair("kernel_size", kernel_size)
        strides = check_int_pair("strides", strides)
        if kernel_size is None and strides != (1, 1):
            raise ValueError(
                "Received an invalid value for `strides`: the fully-connected "
                "form (`kernel_size=None`) has no windows, expected 1. "
                f"Received: strides={strides}, kernel_size=None")
        check_choice("pose", pose, POSES)
        if pose == "matrix" and math.isqrt(capsule_dim) ** 2 != capsule_dim:
            raise ValueError(
                "Received an invalid value for `capsule_dim`, expected a "
                "perfect square with `pose='matrix'` (poses are sqrt(d) x "
                "sqrt(d) matrices); use `pose='vector'` for other sizes. "
                f"Received: capsule_dim={capsule_dim}")
        num_iterations = check_positive_int("num_iterations", num_iterations)
        dropout = check_number("dropout", dropout, minimum=0.0)
        if dropout >= 1.0:
            raise ValueError(
                "Received an invalid value for `dropout`, expected a number "
                f"in [0, 1). Received: dropout={dropout!r}")
        epsilon = check_number("epsilon", epsilon)
        if epsilon <= 0.0:
            raise ValueError(
                "Received an invalid value for `epsilon`, expected a "
                f"positive number. Received: epsilon={epsilon!r}")
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.kernel_size = kernel_size
        self.strides = strides
        self.pose = pose
        self.num_iterations = num_iterations
        self.dropout = dropout
        self.epsilon = epsilon
        self.kernel_initializer = (
            None if kernel_initializer is None
            else keras.initializers.get(kernel_initializer))
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint))
        self._inverse_sqrt_dim = 1.0 / math.sqrt(capsule_dim)
        self._pose_side = math.isqrt(capsule_dim)

    keys_since_contract = ("temperature", "couplings_layout")

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (..., d, j, z) or, for pose matrices, (..., k, t, j): the third
        # axis from the end is contracted.
        return {"kernel": (len(self.kernel_value("kernel").shape) - 3,)}

    def build_router(self, input_shape):
        self._check_input_shape(input_shape)
        input_shape = tuple(input_shape)
        input_dim = input_shape[-1]
        if self.kernel_size is None:
            num_children = math.prod(input_shape[1:-1])
            num_types, window = num_children, (1, 1)
            self._num_positions = 1
            self._num_children = num_children
            kernel_shape = (num_children,)
        else:
            num_types = input_shape[3]
            window = self.kernel_size
            out_height, out_width = self._output_size(input_shape)
            self._num_positions = out_height * out_width
            self._num_children = window[0] * window[1] * num_types
            kernel_shape = (*window, num_types)
        if self.pose == "matrix":
            side = self._pose_side
            kernel_shape += (side, side, self.num_capsules)
            fan = side
        else:
            kernel_shape += (input_dim, self.num_capsules, self.capsule_dim)
            fan = input_dim
        initializer = self.kernel_initializer
        if initializer is None:
            initializer = keras.initializers.RandomNormal(stddev=math.sqrt(
                self.num_capsules / (fan * num_types * window[0] * window[1])))
        self.kernel = self.add_weight(
            name="kernel", shape=kernel_shape, initializer=initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        state_shape = (None, self._num_positions, self.num_capsules,
                       self.capsule_dim)
        if self.dropout > 0.0:
            self.dropout_layer = keras.layers.Dropout(
                self.dropout, dtype=self.float_dtype_policy(),
                name="dropout")
            self.dropout_layer.build(state_shape)
        else:
            self.dropout_layer = None
        if self.capsule_dim > 1:
            self.layer_norm = keras.layers.LayerNormalization(
                axis=-1, epsilon=self.epsilon,
                dtype=self.float_dtype_policy(), name="layer_norm")
            self.layer_norm.build(state_shape)
        else:
            self.layer_norm = None
        self.input_spec = keras.InputSpec(
            ndim=len(input_shape),
            axes={axis: size for axis, size in enumerate(input_shape)
                  if axis > 0})

    def call(self, inputs, parents=None, training=None,
             return_couplings=False):
        passes = self.compute_routing(inputs, parents=parents,
                                      training=training)
        return self.routing_outputs(passes, return_couplings)

    def compute_routing(self, inputs, keep_passes=False, parents=None,
                        training=None):
        votes = self.votes(inputs)  # lazy (b, x, j, i, z)
        if parents is None:
            states = [self._route(votes, None, training)]
            for _ in range(self.num_iterations - 1):
                states.append(self._route(votes, states[-1][0], training))
        else:
            self._check_parents_shape(parents.shape, inputs.shape)
            states = [self._route(
                votes, self._to_state(ops.cast(parents, votes.dtype)),
                training)]
        if not keep_passes:
            states = states[-1:]
        couplings, agreement = [], []
        for _, pass_couplings, pass_agreement in states:
            if pass_couplings is None:  # the uniform first pass
                pass_couplings, pass_agreement = self._uniform_pass(votes)
            couplings.append(pass_couplings)
            agreement.append(pass_agreement)
        return RoutingPasses(
            outputs=self._from_state(states[-1][0]),
            couplings=[self._router_layout(c) for c in couplings],
            agreement=[self._router_layout(a) for a in agreement],
            parents=[self._from_state(state) for state, _, _ in states])

    def _uniform_pass(self, votes):
        """Float32 couplings `1 / num_capsules` and zero agreement."""
        # (b, x, 1, i) zeros + (1, 1, j, 1) zeros -> (b, x, j, i)
        agreement = ops.expand_dims(ops.zeros_like(
            votes.children[..., 0], dtype="float32"), 2) + ops.zeros(
            (1, 1, self.num_capsules, 1), dtype="float32")
        return agreement + 1.0 / self.num_capsules, agreement

    def _router_layout(self, couplings):
        """(b, x, j, i) -> (b, 1, x * i, j), the `Router` layout."""
        couplings = ops.transpose(couplings, (0, 1, 3, 2))  # (b, x, i, j)
        return ops.reshape(couplings, (
            -1, 1, self._num_positions * self._num_children,
            self.num_capsules))

    # --- Routing steps, public for `InvertedAttentionRoutingStack` ------

    def votes(self, inputs):
        """The votes of the child capsules `inputs`, for `route`.

        Use `votes` and `route` to run the routing passes yourself, e.g. to
        route several layers concurrently as `InvertedAttentionRoutingStack`
        does; a plain call runs all `num_iterations` passes itself.

        Args:
            inputs: The child capsules, of the shape the layer was built
                for (the layer must be built).

        Returns:
            An opaque votes object to pass to `route`, as many times as
            needed. The `(batch, positions, num_capsules, children, d)`
            votes are computed on the first agreement pass and kept; the
            uniform first pass needs only their sum over the children,
            which is computed without them (one matrix product, like a
            convolution).
        """
        self._check_built_for(inputs.shape)
        return _LazyVotes(self, self._windows(inputs))

    def route(self, votes, parents=None, training=None,
              return_couplings=False):
        """One routing pass: the new parent poses.

        With `parents=None` this is the uniform first pass (couplings
        `1 / num_capsules`); otherwise the couplings are the softmax over
        the parents of the agreement between `parents` and the votes. Then
        the parents are the LayerNorm of the weighted sums of the votes
        (after dropout when `training`).

        Args:
            votes: What `votes(inputs)` returned.
            parents: `None`, or the current parent poses, of the layer's
                output shape.
            training: bool. Whether dropout is active.
            return_couplings: bool. Also return the pass's couplings, in
                the `Router` layout (float32). Defaults to `False`.

        Returns:
            The new parent poses, of the layer's output shape, in the dtype
            of the votes; with `return_couplings`, `(poses, couplings)`.
        """
        if parents is not None:
            self._check_parents_shape(parents.shape,
                                      self._built_input_shape())
            parents = self._to_state(ops.cast(parents, votes.dtype))
        state, couplings, _ = self._route(votes, parents, training)
        if not return_couplings:
            return self._from_state(state)
        if couplings is None:
            couplings = self._uniform_pass(votes)[0]
        return self._from_state(state), self._router_layout(couplings)

    # --- Routing core ----------------------------------------------------
    # Inside, states and votes put the output positions x on one axis:
    # b: batch, x: output positions (1 in the fully-connected form),
    # i: children of a window (k * k * N), j: parents (num_capsules),
    # s: pose side, a: input dim, z: output dim (capsule_dim).

    def _route(self, votes, parents, training=None):
        """One pass: new parents `(b, x, j, z)`, couplings and agreement.

        The couplings and the agreement are float32 `(b, x, j, i)`, both
        `None` for the uniform first pass (`parents=None`). `votes` is
        what `votes` returns.
        """
        dtype = votes.dtype
        if parents is None:
            couplings = agreement = None
            weighted = self._contract_votes(votes.children, over_children=True)
            weighted = weighted * (1.0 / self.num_capsules)
        else:
            votes = votes.tensor()
            # (b, x, j, i, z) @ (b, x, j, z, 1) -> (b, x, j, i), float32
            agreement = ops.squeeze(ops.matmul(
                capsule_ops.at_least_float32(votes), ops.expand_dims(
                    capsule_ops.at_least_float32(parents), -1)), -1)
            agreement = agreement * self._inverse_sqrt_dim
            couplings = self.tempered_softmax(agreement, axis=2)  # over j
            # (b, x, j, 1, i) @ (b, x, j, i, z) -> (b, x, j, z)
            weighted = ops.squeeze(ops.matmul(
                ops.expand_dims(ops.cast(couplings, dtype), 3), votes), 3)
        if self.dropout_layer is not None:
            weighted = self.dropout_layer(weighted, training=training)
        if self.layer_norm is not None:
            weighted = ops.cast(self.layer_norm(weighted), dtype)
        return weighted, couplings, agreement

    def _contract_votes(self, children, over_children=False):
        """The votes `(b, x, j, i, z)` of `children` `(b, x, i, a)`.

        With `over_children=True`, their sum over the children `(b, x, j,
        z)`, computed without the votes: a single matrix product that
        contracts the children with the pose (a convolution over the
        window); written as one, its TensorFlow training step is 1.5x
        faster than the `einsum`'s at the CIFAR-10 model's first
        convolutional capsules.
        """
        num_positions, num_children = self._num_positions, self._num_children
        kernel = ops.cast(self.kernel_value("kernel"), children.dtype)
        if not over_children:
            votes = self._every_vote(children, kernel)
        elif self.pose == "matrix":
            side = self._pose_side
            # sum_i pose[i] @ kernel[i, :, :, j], with r, k, t indexing the
            # s x s matrices, as one matrix product over (i, k):
            # (b, x, i, r, k) -> (b x r, i k)
            rows = ops.transpose(ops.reshape(
                children, (-1, num_positions, num_children, side, side)),
                (0, 1, 3, 2, 4))
            rows = ops.reshape(rows, (-1, num_children * side))
            # (b x r, i k) @ (i k, t j) -> (b, x, r, t, j) -> (b, x, j, r, t)
            votes = ops.matmul(rows, ops.reshape(
                kernel, (num_children * side, side * self.num_capsules)))
            votes = ops.transpose(ops.reshape(votes, (
                -1, num_positions, side, side, self.num_capsules)),
                (0, 1, 4, 2, 3))
        else:
            # (b, x, i a) @ (i a, j z) -> (b, x, j z)
            votes = ops.matmul(
                ops.reshape(children, (-1, num_positions, num_children
                                       * ops.shape(children)[-1])),
                ops.reshape(kernel, (-1, self.num_capsules
                                     * self.capsule_dim)))
        # (b, x, j, i, z): both routing contractions in `_route` are batched
        # matrix products over (b, x, j) that read the votes in place.
        children_axis = () if over_children else (num_children,)
        return ops.reshape(votes, (-1, num_positions, self.num_capsules,
                                   *children_axis, self.capsule_dim))

    def _every_vote(self, children, kernel):
        """Every vote, `(b x, j, i, z)` or `(b, x, j, i, s, s)`.

        One batched matrix product over the children and a transpose: the
        `einsum` of the same votes had a TensorFlow backward pass 2.4x
        slower at the CIFAR-10 model's first convolutional capsules.
        """
        num_positions, num_children = self._num_positions, self._num_children
        if self.pose != "matrix":
            # (b x, i, a) and (i, a, j, z) -> (b x, j, i, z)
            return capsule_ops.capsule_votes(
                ops.reshape(children, (-1, num_children,
                                       ops.shape(children)[-1])),
                ops.reshape(kernel, (num_children, -1, self.num_capsules,
                                     self.capsule_dim)))
        side = self._pose_side
        # pose[i] @ kernel[i, :, :, j], with r, k, t indexing the s x s
        # matrices: (b, x, i, r, k) -> (i, b x r, k)
        rows = ops.transpose(ops.reshape(
            children, (-1, num_positions, num_children, side, side)),
            (2, 0, 1, 3, 4))
        rows = ops.reshape(rows, (num_children, -1, side))
        # (i, b x r, k) @ (i, k, t j) -> (i, b, x, r, t, j)
        votes = ops.matmul(rows, ops.reshape(
            kernel, (num_children, side, side * self.num_capsules)))
        votes = ops.reshape(votes, (num_children, -1, num_positions, side,
                                    side, self.num_capsules))
        return ops.transpose(votes, (1, 2, 5, 0, 3, 4))

    def _windows(self, inputs):
        """Children per output position: `(b, x, i, a)`, i = (p, q, type)."""
        shape = tuple(inputs.shape)
        if self.kernel_size is None:
            return ops.reshape(inputs, (-1, 1, self._num_children, shape[-1]))
        (kernel_h, kernel_w), (stride_h, stride_w) = (self.kernel_size,
                                                      self.strides)
        out_height, out_width = self._output_size(shape)
        slices = []
        for p in range(kernel_h):
            for q in range(kernel_w):
                # (b, h', w', N, a): the capsules at (S h' + p, S w' + q).
                slices.append(inputs[
                    :, p:p + stride_h * (out_height - 1) + 1:stride_h,
                    q:q + stride_w * (out_width - 1) + 1:stride_w])
        windows = ops.stack(slices, axis=3)  # (b, h', w', k * k, N, a)
        return ops.reshape(windows, (-1, self._num_positions,
                                     self._num_children, shape[-1]))

    def _to_state(self, parents):
        return ops.reshape(parents, (-1, self._num_positions,
                                     self.num_capsules, self.capsule_dim))

    def _from_state(self, state):
        return ops.reshape(state, (-1,) + self._output_shape_without_batch())

    def _check_built_for(self, input_shape):
        if not self.built:
            raise ValueError(
                f"`{type(self).__name__}` {self.name!r} must be built (by a "
                "call or `build(input_shape)`) before `votes`. Received: "
                f"input_shape={tuple(input_shape)}")
        built = self._built_input_shape()
        if tuple(input_shape[1:]) != built[1:]:
            raise ValueError(
                f"`{type(self).__name__}` {self.name!r} was already built "
                f"for inputs of shape {built}. Received: "
                f"input_shape={tuple(input_shape)}")

    def _built_input_shape(self):
        return (None,) + tuple(
            self.input_spec.axes[axis]
            for axis in range(1, self.input_spec.ndim))

    def _output_shape_without_batch(self, input_shape=None):
        if self.kernel_size is None:
            return (self.num_capsules, self.capsule_dim)
        if input_shape is None:
            input_shape = self._built_input_shape()
        return (*self._output_size(input_shape), self.num_capsules,
                self.capsule_dim)

    # --- Shapes ----------------------------------------------------------

    def _output_size(self, input_shape):
        sizes = []
        for size, kernel, stride in zip(input_shape[1:3], self.kernel_size,
                                        self.strides):
            sizes.append(None if size is None
                         else (size - kernel) // stride + 1)
        return tuple(sizes)

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        name = type(self).__name__
        if self.kernel_size is None:
            if len(input_shape) not in (3, 5):
                raise ValueError(
                    f"`{name}` (fully connected, `kernel_size=None`) expects "
                    "capsules (batch, num_input_capsules, input_capsule_dim) "
                    "or a capsule map (batch, height, width, num_input_types, "
                    f"input_capsule_dim). Received: input_shape={input_shape}")
        elif len(input_shape) != 5:
            raise ValueError(
                f"`{name}` (convolutional, kernel_size={self.kernel_size}) "
                "expects a 5-D capsule map (batch, height, width, "
                "num_input_types, input_capsule_dim). Received: "
                f"input_shape={input_shape}")
        if any(size is None for size in input_shape[1:]):
            raise ValueError(
                f"`{name}` needs every dimension but the batch size to be "
                f"known. Received: input_shape={input_shape}")
        if self.pose == "matrix" and input_shape[-1] != self.capsule_dim:
            side = self._pose_side
            raise ValueError(
                f"`{name}` with `pose='matrix'` needs input poses of the "
                f"same size as its own, capsule_dim={self.capsule_dim} "
                f"({side}x{side}); use `pose='vector'` to change the pose "
                f"size. Received: input_shape={input_shape}")
        if self.kernel_size is not None:
            height, width = input_shape[1:3]
            if self.kernel_size[0] > height or self.kernel_size[1] > width:
                raise ValueError(
                    f"`{name}` has a kernel_size={self.kernel_size} larger "
                    f"than its {height}x{width} capsule map. Received: "
                    f"input_shape={input_shape}")

    def _check_parents_shape(self, parents_shape, input_shape):
        expected = self._output_shape_without_batch(input_shape)
        received = tuple(parents_shape)
        if received[1:] != expected:
            raise ValueError(
                f"`{type(self).__name__}` expects `parents` of its output "
                f"shape (batch, {', '.join(map(str, expected))}). Received: "
                f"parents.shape={received}")

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0],) + self._output_shape_without_batch(
            input_shape)

    def compute_output_spec(self, inputs, parents=None, training=None,
                            return_couplings=False):
        if parents is not None:
            self._check_parents_shape(parents.shape, inputs.shape)
        return super().compute_output_spec(
            inputs, return_couplings=return_couplings)

    def compute_couplings_shape(self, input_shape):
        output_shape = self.compute_output_shape(input_shape)
        if self.kernel_size is None:
            children = math.prod(input_shape[1:-1])
        else:
            children = (math.prod(output_shape[1:3])
                        * math.prod(self.kernel_size) * input_shape[3])
        return (input_shape[0], 1, children, self.num_capsules)

    def couplings_grid(self, input_shape):
        if self.kernel_size is None:
            return None
        return tuple(self._output_size(input_shape))

    def get_config(self):
        config = super().get_config()
        config.update({
            "kernel_size": self.kernel_size,
            "strides": self.strides,
            "pose": self.pose,
            "num_iterations": self.num_iterations,
            "dropout": self.dropout,
            "epsilon": self.epsilon,
            "kernel_initializer": (
                None if self.kernel_initializer is None
                else keras.initializers.serialize(self.kernel_initializer)),
        })
        config.update(serialize_regularizers_and_constraints(self, ("kernel",)))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per child `i` and parent `j` (Tsai et al., 2020, Procedure 1): the
        vote, `s^3` for `s x s` matrix poses, `input_dim * capsule_dim`
        for vector poses; per pass after the uniform first, the
        agreement and the weighted sum, `capsule_dim` each (the uniform
        pass only adds).
        """
        return self._child_parent_pairs(input_shape) * (
            self.vote_multiply_adds(input_shape)
            + 2 * (self.num_iterations - 1) * self.capsule_dim)

    def vote_multiply_adds(self, input_shape):
        """Multiply–adds of one child's vote for one parent."""
        if self.pose == "matrix":
            return self._pose_side ** 3
        return int(input_shape[-1]) * self.capsule_dim


class _LazyVotes:
    """The votes of one layer call: the children, and the votes on demand.

    `tensor()` materialises the `(b, x, j, i, z)` votes once and keeps them,
    so several agreement passes over the same children share them.
    """

    def __init__(self, layer, children):
        self.layer = layer
        self.children = children  # (b, x, i, a)
        self.dtype = children.dtype
        self._tensor = None

    def tensor(self):
        if self._tensor is None:
            self._tensor = self.layer._contract_votes(self.children)
        return self._tensor
