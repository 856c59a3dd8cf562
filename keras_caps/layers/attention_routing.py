import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import COUPLINGS
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.ops import capsule_ops
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int
from keras_caps.validation import serialize_regularizers_and_constraints
from keras_caps.validation import set_regularizers_and_constraints

VALUE_FORMS = ("votes", "shared")
NORMALIZATIONS = ("parents", "children")


@keras_caps_export("keras_caps.layers.AttentionRouting")
class AttentionRouting(Router):
    """Capsule layer with query-key-value attention routing.

    One attention pass replaces the iterative agreement loop: each parent
    (output capsule) `j` has a query, each child (input capsule) `i` a key,
    and the couplings are the softmax of their scaled dot products. The
    parents are the squashed sums of the children's values weighted by the
    couplings:

    ```
    keys[h, i]        = W_k[h] u_i  (+ R[h, position(i)])         # (d_k,)
    queries[h, j]     = Q[h, j]                      # learned, first pass
                        W_q[h] parents[j]            # later passes
    scores[h, i, j]   = <queries[h, j], keys[h, i]> / sqrt(d_k)
    couplings[h, i, :] = softmax(scores[h, i, :] / temperature)   # over j
    values[i, j]      = W_ij (a_i u_i)       # votes (default)
                        W_v (a_i u_i)        # shared: the same for every j
    parents[j][h]     = squash(sum_i couplings[h, i, j] * values[i, j][h])
    ```

    `[h]` is head `h`'s slice of `capsule_dim / num_heads` pose entries:
    each head routes its own slice with its own couplings, as in multi-head
    attention, and the squash acts on the whole concatenated pose. With
    `num_iterations > 1` every pass after the first takes its queries from
    the previous pass's parents. With `normalization="children"` the softmax
    runs over the children instead (each parent is a weighted mean of the
    children's values, the Transformer convention). Child activations
    `a_i` (a second input) scale the values, not the keys. For children on
    a grid `(batch, height, width, num_types, input_dim)`,
    `use_position_term=True` adds a learned per-position key offset `R`
    (zero at initialisation), i.e. the score gains `<q_j, R_p(i)> /
    sqrt(d_k)`; the children are then the grid's capsules in row-major
    `(row, column, type)` order.

    One pass costs `O(N M d)` for the weighted votes plus `O(N M h d_in)`
    for the scores, against three agreement passes over the votes for
    `DynamicRouting` with its default 3 iterations. The keys are never
    built (the queries are folded into the key kernel, `q . (W_k u) =
    (W_k^T q) . u`), and with one head neither are the votes: the couplings
    scale the children, and one matrix product per parent contracts them
    with the vote matrices.

    Args:
        num_capsules: int. Number of output (parent) capsules `M`.
        capsule_dim: int. Dimension of each output capsule; a multiple of
            `num_heads`.
        num_iterations: int. Attention passes, at least 1. Defaults to `1`.
        num_heads: int. Attention heads. Defaults to `1`.
        key_dim: int. Query and key size `d_k` of each head. Defaults to
            `16`.
        value_form: str. `"votes"`: a `(input_dim, capsule_dim)` vote matrix
            per child and parent (the capsule convention); `"shared"`: one
            `(input_dim, capsule_dim)` value matrix for all, so parents
            differ only through their couplings. Defaults to `"votes"`.
        normalization: str. The softmax axis: `"parents"` (each child's
            couplings sum to 1; capsule competition) or `"children"` (each
            parent's couplings sum to 1). Defaults to `"parents"`.
        use_position_term: bool. Learned position term for grid children
            (5-D inputs, which need this option). Defaults to `False`.
        squash: str. `"efficient"` or `"sabour"`, see
            `keras_caps.ops.squash`. Defaults to `"efficient"`.
        temperature: float. Routing temperature, above 0: the couplings
            are `softmax(scores / temperature)`. Held as a non-trainable
            float32 variable (`layer.temperature = 0.5` changes it, also
            during `fit`). Defaults to `1.0`.
        coupling: str. The softmax's replacement, of `scores /
            temperature`: `"softmax"` (the default), `"sparsemax"`,
            `"entmax15"`, `"sigmoid"` (independent gates, the soft
            attention of the capsule attention-routing literature; they do
            not sum to 1) or `"gumbel_softmax"` (hard attention: one-hot
            samples while training, straight-through); see `Router`.
        gumbel_inference: str. `"argmax"` (the default) or `"softmax"`:
            the couplings of `coupling="gumbel_softmax"` outside training.
        seed: int. Seed of the Gumbel noise. Defaults to `None`.
        kernel_initializer: Initializer for the vote (or shared value)
            matrices. Defaults to `None`: `TruncatedNormal(stddev=0.1)` for
            votes (as `DynamicRouting`), `"glorot_uniform"` for the shared
            value matrix.
        attention_initializer: Initializer for the parent queries and the
            query and key projections. Defaults to `"glorot_uniform"`.
        kernel_regularizer: Regularizer for the vote (or value) matrices.
            Defaults to `None`.
        kernel_constraint: Constraint for them. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The children `(batch, num_inputs, input_dim)` (or, with
            `use_position_term=True`, `(batch, height, width, num_types,
            input_dim)`), or a list `[children, activations]` with
            activations of the children's shape without the last axis,
            e.g. `(batch, num_inputs)`.
        training: bool. Whether the layer is training (draws the Gumbel
            samples of `coupling="gumbel_softmax"`). Defaults to `None`.
        return_couplings: bool. Also return the last pass's couplings.
            Defaults to `False`.

    Returns:
        Parents of shape `(batch, num_capsules, capsule_dim)`; with
        `return_couplings=True`, a tuple `(parents, couplings)` with
        couplings of shape `(batch, num_heads, num_inputs, num_capsules)`
        (`num_inputs = height * width * num_types` for grid children),
        summing to 1 over the parents (axis 3) with
        `normalization="parents"`, over the children (axis 2) with
        `"children"`. `routing_trace` also returns every pass.

    Example:

    >>> layer = keras_caps.layers.AttentionRouting(
    ...     num_capsules=10, capsule_dim=16, num_heads=4)
    >>> parents, couplings = layer(np.ones((2, 32, 8)),
    ...                            return_couplings=True)
    >>> tuple(parents.shape), tuple(couplings.shape)
    ((2, 10, 16), (2, 4, 32, 10))

    Reference:
    - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    - [Locatello et al., 2020](https://arxiv.org/abs/2006.15055) (learned
      parent queries, as slot-style cross-attention)
    """

    def __init__(self, num_capsules, capsule_dim, num_iterations=1,
                 num_heads=1, key_dim=16, value_form="votes",
                 normalization="parents", use_position_term=False,
                 squash="efficient", temperature=1.0,
                 kernel_initializer=None,
                 attention_initializer="glorot_uniform",
                 kernel_regularizer=None, kernel_constraint=None, **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        num_iterations = check_positive_int("num_iterations", num_iterations)
        num_heads = check_positive_int("num_heads", num_heads)
        key_dim = check_positive_int("key_dim", key_dim)
        if capsule_dim % num_heads:
            raise ValueError(
                "Received an invalid value for `num_heads`, expected a "
                f"divisor of capsule_dim={capsule_dim} (each head routes "
                "capsule_dim / num_heads pose entries). Received: "
                f"num_heads={num_heads}")
        check_choice("value_form", value_form, VALUE_FORMS)
        check_choice("normalization", normalization, NORMALIZATIONS)
        check_bool("use_position_term", use_position_term)
        check_choice("squash", squash, capsule_ops.SQUASH_VARIANTS)
        if kernel_initializer is None:
            kernel_initializer = (
                keras.initializers.TruncatedNormal(stddev=0.1)
                if value_form == "votes" else "glorot_uniform")
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.num_iterations = num_iterations
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_form = value_form
        self.normalization = normalization
        self.use_position_term = use_position_term
        self.squash = squash
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.attention_initializer = keras.initializers.get(
            attention_initializer)
        set_regularizers_and_constraints(
            self, kernel=(kernel_regularizer, kernel_constraint))
        self._head_dim = capsule_dim // num_heads
        self._score_scale = 1.0 / math.sqrt(key_dim)

    keys_since_contract = ("temperature",)
    coupling_options = COUPLINGS

    @property
    def normalization_axis(self):
        return self.normalization

    @property
    def vote_squash(self):
        """The layer's `squash` with `value_form="votes"` (parents are
        squashed weighted sums of votes), else `None`."""
        return self.squash if self.value_form == "votes" else None

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # Votes (i, d, j, z) or shared values (d, z): d is contracted.
        return {"kernel": (1,) if self.value_form == "votes" else (0,)}

    def build_router(self, input_shape):
        children_shape, activations_shape = self._split_shapes(input_shape)
        self._check_shapes(children_shape, activations_shape)
        num_inputs = math.prod(children_shape[1:-1])
        input_dim = children_shape[-1]
        self.parent_queries = self.add_weight(
            name="parent_queries",
            shape=(self.num_heads, self.num_capsules, self.key_dim),
            initializer=self.attention_initializer)
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(input_dim, self.num_heads, self.key_dim),
            initializer=self.attention_initializer)
        if self.num_iterations > 1:
            self.query_kernel = self.add_weight(
                name="query_kernel",
                shape=(self.capsule_dim, self.num_heads, self.key_dim),
                initializer=self.attention_initializer)
        else:
            self.query_kernel = None
        if self.value_form == "votes":
            kernel_shape = (num_inputs, input_dim, self.num_capsules,
                            self.capsule_dim)
        else:
            kernel_shape = (input_dim, self.capsule_dim)
        self.kernel = self.add_weight(
            name="kernel", shape=kernel_shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint)
        if self.use_position_term:
            self.position_term = self.add_weight(
                name="position_term",
                shape=(*children_shape[1:3], self.num_heads, self.key_dim),
                initializer="zeros")
        else:
            self.position_term = None
        self._children_shape = (None,) + tuple(children_shape[1:])
        self._num_inputs = num_inputs

    def compute_routing(self, inputs, keep_passes=False, training=None):
        trace = self._route(inputs, keep_passes=keep_passes,
                            training=training)
        votes = self._votes(trace["children"]) if keep_passes else None
        return RoutingPasses(
            outputs=trace["parents"][-1], couplings=trace["couplings"],
            agreement=trace["scores"], parents=trace["parents"],
            votes=votes)

    def _votes(self, children):
        """What each child proposes to each parent, `(b, i, j, z)`."""
        kernel = ops.cast(self.kernel_value("kernel"), children.dtype)
        if self.value_form == "votes":
            return ops.transpose(capsule_ops.capsule_votes(children, kernel),
                                 (0, 2, 1, 3))
        return ops.repeat(ops.expand_dims(
            ops.matmul(children, kernel), 2), self.num_capsules, axis=2)

    # --- Routing ---------------------------------------------------------
    # b: batch, i: children, j: parents, a: input dim, h: heads,
    # k: key dim, e: head slice of the pose (capsule_dim / num_heads),
    # z: capsule_dim. Inside, scores and couplings are laid out parent-
    # major, `(b, j, h, i)`: the scores come out of one matrix product in
    # that layout, the softmax over the parents reduces an inner axis of
    # contiguous rows, and the couplings multiply the votes `(b, j, i, z)`
    # as they are. The trace gives them in the contract's `(b, h, i, j)`.

    def _route(self, inputs, keep_passes, training=None):
        children, activations = self._split_inputs(inputs)
        self._check_shapes(children.shape,
                           None if activations is None
                           else activations.shape)
        dtype = children.dtype
        children = ops.reshape(children, (-1, self._num_inputs,
                                           ops.shape(children)[-1]))
        # Scores from the unscaled children, in float32: (b, a, i).
        wide_columns = ops.transpose(
            capsule_ops.at_least_float32(children), (0, 2, 1))
        key_kernel = ops.cast(self.key_kernel, "float32")  # (a, h, k)
        position_keys = (None if self.position_term is None
                         else self._position_keys())  # (h, i, k)
        if activations is not None:
            activations = ops.reshape(ops.cast(activations, dtype),
                                      (-1, self._num_inputs, 1))
            children = children * activations
        values = None if self.value_form == "votes" else (
            self._shared_values(children))
        all_parents, all_couplings, all_scores = [], [], []
        parents = None
        for iteration in range(self.num_iterations):
            scores = self._scores(wide_columns, key_kernel, position_keys,
                                  parents)  # (b, j, h, i), float32
            couplings = self._couplings(scores, training)
            parents = capsule_ops.squash(
                self._weighted_sum(ops.cast(couplings, dtype), children,
                                   values),
                variant=self.squash)
            if keep_passes or iteration == self.num_iterations - 1:
                all_parents.append(parents)
                # (b, j, h, i) -> the contract's (b, h, i, j)
                all_couplings.append(ops.transpose(couplings, (0, 2, 3, 1)))
                all_scores.append(ops.transpose(scores, (0, 2, 3, 1)))
        return {"parents": all_parents, "couplings": all_couplings,
                "scores": all_scores, "children": children}

    def _couplings(self, scores, training):
        """The couplings `(b, j, h, i)` of the scores `(b, j, h, i)`.

        The sparse and hard couplings run in the contract's layout `(b, h,
        i, j)`: their sorts work along the last axis, and the Gumbel noise
        is drawn in that layout, so a seed gives the same samples as in
        the trace.
        """
        parents_axis = self.normalization == "parents"
        if self.coupling == "softmax":
            return self.normalize_couplings(scores, 1 if parents_axis else 3,
                                            training)
        couplings = self.normalize_couplings(
            ops.transpose(scores, (0, 2, 3, 1)), 3 if parents_axis else 2,
            training)
        return ops.transpose(couplings, (0, 3, 1, 2))

    def _scores(self, wide_columns, key_kernel, position_keys, parents):
        """Scaled float32 scores `(b, j, h, i)` of one pass.

        The first pass's queries are the learned parent queries; later
        passes' come from the previous `parents`. `q . (W_k u)` is
        `(W_k^T q) . u`: the queries, scaled by `1 / sqrt(d_k)`, are folded
        into the key kernel `(a, h, k)` and the keys are never built.
        """
        if parents is None:
            queries = ops.cast(self.parent_queries, "float32")  # (h, j, k)
            folded_equation = "ahk,hjk->jha"
            position_equation = "hik,hjk->jhi"
        else:
            # (b, j, h, k) queries from the previous parents.
            queries = ops.einsum(
                "bjz,zhk->bjhk", capsule_ops.at_least_float32(parents),
                ops.cast(self.query_kernel, "float32"))
            folded_equation = "ahk,bjhk->bjha"
            position_equation = "hik,bjhk->bjhi"
        queries = queries * self._score_scale
        folded = ops.einsum(folded_equation, key_kernel, queries)
        # (j h, a) @ (b, a, i) or (b, j h, a) @ (b, a, i) -> (b, j h, i)
        folded = ops.reshape(folded, (
            *(() if parents is None else (-1,)),
            self.num_capsules * self.num_heads, ops.shape(key_kernel)[0]))
        scores = ops.reshape(ops.matmul(folded, wide_columns), (
            -1, self.num_capsules, self.num_heads, self._num_inputs))
        if position_keys is not None:
            scores = scores + ops.einsum(position_equation, position_keys,
                                         queries)
        return scores

    def _position_keys(self):
        """The position term per child: `(h, i, k)`, float32."""
        height, width, num_types = self._children_shape[1:4]
        table = ops.cast(self.position_term, "float32")  # (H, W, h, k)
        table = ops.broadcast_to(
            ops.expand_dims(table, 2),
            (height, width, num_types, self.num_heads, self.key_dim))
        table = ops.reshape(table, (self._num_inputs, self.num_heads,
                                    self.key_dim))
        return ops.transpose(table, (1, 0, 2))

    def _shared_values(self, children):
        """The shared values `W_v u_i`, per head: `(b, h, i, e)`."""
        values = ops.matmul(children, ops.cast(self.kernel_value("kernel"),
                                               children.dtype))
        values = ops.reshape(values, (-1, self._num_inputs, self.num_heads,
                                      self._head_dim))
        return ops.transpose(values, (0, 2, 1, 3))

    def _weighted_sum(self, couplings, children, values):
        """`sum_i couplings[j, h, i] * values[i, j][h]`: `(b, j, z)`.

        For votes, `sum_i c_ij W_ij u_i = sum_(i, a) (c_ij u_ia) W_ij[a]`:
        the couplings scale the children and one batched matrix product
        over the parents (and heads) contracts them with the vote matrices,
        so the `(b, i, j, z)` votes are never materialised.
        """
        if self.value_form == "shared":
            # (b, h, j, i) @ (b, h, i, e) -> (b, h, j, e) -> (b, j, h, e)
            weighted = ops.transpose(ops.matmul(
                ops.transpose(couplings, (0, 2, 1, 3)), values),
                (0, 2, 1, 3))
            return ops.reshape(weighted, (-1, self.num_capsules,
                                          self.capsule_dim))
        num_inputs, input_dim = self._num_inputs, ops.shape(children)[-1]
        if self.num_heads > 1:
            return self._weighted_votes(couplings, children)
        # (b, j, 1, i) -> (j, b, i, 1) times (b, i, a) -> (j, b, i a)
        weights = ops.expand_dims(ops.transpose(
            ops.squeeze(couplings, 2), (1, 0, 2)), -1)
        scaled = ops.reshape(weights * children,
                             (self.num_capsules, -1, num_inputs * input_dim))
        # (i, a, j, z) -> (j, i a, z)
        kernel = ops.reshape(ops.cast(self.kernel_value("kernel"),
                                     children.dtype), (
            num_inputs * input_dim, self.num_capsules, self.capsule_dim))
        kernel = ops.transpose(kernel, (1, 0, 2))
        weighted = ops.matmul(scaled, kernel)  # (j, b, z)
        return ops.transpose(weighted, (1, 0, 2))

    def _weighted_votes(self, couplings, children):
        """`_weighted_sum` for several heads, through the votes.

        The votes come out of one batched matrix product over the children
        and are laid out `(b, j, i, z)`; one batched matrix product over
        `(b, j)` weighs them with every head's couplings, `(h, i) @ (i, z)`,
        and each head keeps its own slice of the result (the diagonal
        blocks; the others are `num_heads - 1` spare products of a small
        matrix).

        The spare blocks are cheaper than every exact per-head form we
        measured (TensorFlow, 2-core CPU, `(64, 1152, 8) -> 10 x 16`, 4
        heads, one training step): contracting each head alone,
        `(b, j, h, 1, i) @ (b, j, h, i, e)`, is 1.2-1.3x slower (matrix-
        vector products); folding each head's couplings into the children
        as the one-head path does builds `num_heads * input_dim` values
        per child and parent, twice the votes here, and is 1.6-1.9x
        slower; a broadcast weighted sum over the children, in either
        layout, or a hand-written gradient that skips the votes'
        transpose, 1.1-1.5x.
        """
        heads = self.num_heads
        votes = capsule_ops.capsule_votes(children,
                                          self.kernel_value("kernel"))
        # (b, j, h, i) @ (b, j, i, z) -> (b, j, h, z)
        weighted = ops.matmul(couplings, votes)
        weighted = ops.reshape(weighted, (
            -1, self.num_capsules, heads, heads, self._head_dim))
        # Head h's couplings on head h's slice: (b, j, h, e).
        diagonal = ops.reshape(ops.eye(heads, dtype=weighted.dtype),
                               (1, 1, heads, heads, 1))
        weighted = ops.sum(weighted * diagonal, axis=2)
        return ops.reshape(weighted, (-1, self.num_capsules,
                                      self.capsule_dim))

    # --- Inputs and shapes -----------------------------------------------

    def _split_inputs(self, inputs):
        if isinstance(inputs, (list, tuple)):
            self._check_input_count(len(inputs))
            if len(inputs) == 1:
                return inputs[0], None
            return inputs[0], inputs[1]
        return inputs, None

    def _split_shapes(self, input_shape):
        if isinstance(input_shape, (list, tuple)) and input_shape and (
                isinstance(input_shape[0], (list, tuple))
                or input_shape[0] is None and len(input_shape) == 2
                and isinstance(input_shape[1], (list, tuple))):
            self._check_input_count(len(input_shape))
            shapes = list(input_shape) + [None]
            return tuple(shapes[0]), (
                None if shapes[1] is None else tuple(shapes[1]))
        return tuple(input_shape), None

    def _check_input_count(self, count):
        if count not in (1, 2):
            raise ValueError(
                "`AttentionRouting` takes the children, or a list "
                "[children, activations]. Received: a list of "
                f"{count} inputs")

    def _check_shapes(self, children_shape, activations_shape):
        children_shape = tuple(children_shape)
        if self.use_position_term:
            if len(children_shape) != 5:
                raise ValueError(
                    "`AttentionRouting` with `use_position_term=True` "
                    "expects grid children (batch, height, width, "
                    "num_types, input_dim). Received: "
                    f"input_shape={children_shape}")
        elif len(children_shape) == 5:
            raise ValueError(
                "`AttentionRouting` received grid children (batch, height, "
                "width, num_types, input_dim); pass "
                "`use_position_term=True` for them, or reshape them to "
                "(batch, num_inputs, input_dim). Received: "
                f"input_shape={children_shape}")
        elif len(children_shape) != 3:
            raise ValueError(
                "`AttentionRouting` expects children (batch, num_inputs, "
                f"input_dim). Received: input_shape={children_shape}")
        if any(size is None for size in children_shape[1:]):
            raise ValueError(
                "`AttentionRouting` needs every dimension of the children "
                "but the batch size to be known. Received: "
                f"input_shape={children_shape}")
        if self.built and children_shape[1:] != self._children_shape[1:]:
            raise ValueError(
                "`AttentionRouting` was built for children of shape "
                f"{self._children_shape}. Received: "
                f"input_shape={children_shape}")
        if activations_shape is not None:
            activations_shape = tuple(activations_shape)
            if activations_shape[1:] != children_shape[1:-1]:
                expected = ", ".join(map(str, children_shape[1:-1]))
                raise ValueError(
                    "Received an invalid shape for the activations (second "
                    "input), expected the children's shape without its "
                    f"last axis, (batch, {expected}). Received: "
                    f"activations.shape={activations_shape} for children "
                    f"of shape {children_shape}")

    def compute_output_shape(self, input_shape):
        children_shape, activations_shape = self._split_shapes(input_shape)
        self._check_shapes(children_shape, activations_shape)
        return (children_shape[0], self.num_capsules, self.capsule_dim)

    def compute_couplings_shape(self, input_shape):
        children_shape, _ = self._split_shapes(input_shape)
        return (children_shape[0], self.num_heads,
                math.prod(children_shape[1:-1]), self.num_capsules)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_iterations": self.num_iterations,
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_form": self.value_form,
            "normalization": self.normalization,
            "use_position_term": self.use_position_term,
            "squash": self.squash,
            "kernel_initializer":
                keras.initializers.serialize(self.kernel_initializer),
            "attention_initializer":
                keras.initializers.serialize(self.attention_initializer),
        })
        config.update(serialize_regularizers_and_constraints(
            self, ("kernel",)))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        The equations of the class docstring: the keys `W_k u_i`
        (`input_dim * heads * key_dim` per child); the values, votes
        `W_ij u_i` (`input_dim * capsule_dim` per child and parent) or
        shared `W_v u_i` (`input_dim * capsule_dim` per child); per pass
        the scores (`heads * key_dim` per child and parent) and the
        weighted sum (`capsule_dim` per child and parent); per pass after
        the first the queries `W_q parents_j` (`capsule_dim * heads *
        key_dim` per parent). The first pass's queries are weights.
        """
        children_shape, _ = self._split_shapes(input_shape)
        num_inputs = math.prod(children_shape[1:-1])
        input_dim = int(children_shape[-1])
        pairs = num_inputs * self.num_capsules
        head_keys = self.num_heads * self.key_dim
        values = input_dim * self.capsule_dim * (
            pairs if self.value_form == "votes" else num_inputs)
        per_pass = pairs * (head_keys + self.capsule_dim)
        queries = self.num_capsules * self.capsule_dim * head_keys
        return (num_inputs * input_dim * head_keys + values
                + self.num_iterations * per_pass
                + (self.num_iterations - 1) * queries)
