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

INPUT_FORMATS = ("capsules", "vectors")
OUTPUT_FORMATS = ("capsules", "vectors")
# The floor of the two divisions of self-routing (by the children's total
# activation and by a parent's weighted activation): a parent that nothing
# reaches gets activation 0 and pose 0 instead of 0 / 0, and the gradients
# stay below float16's maximum (see `mixture_weights`).
ACTIVATION_FLOOR = 1e-4
# Added under the square root of the lengths of vector capsules, as
# `keras_caps.ops.capsule_length` (and `Length`) do.
LENGTH_EPSILON = 1e-7
WEIGHTS = ("pose", "route", "bias")


@keras_caps_export("keras_caps.layers.SelfRouting")
class SelfRouting(Router):
    """Fully connected self-routing capsule layer (Hahn, Pyeon & Kim, 2019).

    Self-routing has no agreement and no iterations: each child capsule
    `i` (pose `u_i`, activation `a_i`) has its own routing network, one
    linear map and a softmax over the parents, and the parents are mixtures
    of the children's votes weighted by coupling times activation, as in a
    mixture of experts (Hahn et al., 2019, Section 3):

    ```
    c[i, j]  = softmax_j((W_route[i] @ u[i] + b_route[i]) / temperature)
    r[i, j]  = c[i, j] * a[i]
    a_out[j] = sum_i r[i, j] / sum_i a[i]                  # in [0, 1]
    v[i, j]  = W_pose[i, j] @ u[i]                         # the votes
    u_out[j] = sum_i r[i, j] * v[i, j] / sum_i r[i, j]
    ```

    Capsules carry their activation: with `input_format="capsules"` the
    last axis holds the pose entries followed by the activation (the
    paper's primary capsules take it from a sigmoid; it must not be
    negative). With `input_format="vectors"` the children are squashed
    vectors (the CapsNet primary capsules): the pose is the vector and
    the activation its length `sqrt(||u||^2 + 1e-7)`. Likewise
    `output_format="capsules"` returns the pose followed by the
    activation, and `output_format="vectors"` the vector
    `a_out[j] * u_out[j] / sqrt(||u_out[j]||^2 + 1e-7)`, whose length
    is the activation, so `Length` reads it as the class score.

    Poses are vectors of any size `d` and `W_pose[i, j]` is a full `z x d`
    map per (child, parent), as in the authors' code (whose experiments use
    16-entry poses). The routing weights start at zero (also the authors'
    code), so every child first splits itself evenly between the parents.
    The votes are never materialised in a call: the weighted children are
    contracted with `W_pose` in one matrix product per parent.

    Zero activations: where the children's total activation `sum_i a[i]`
    is below `1e-4`, the division takes `1e-4` instead, so the parents'
    activations fall linearly to 0 with the children's. A parent whose
    weighted activation `sum_i r[i, j]` is below `1e-4` (all children off,
    or routed elsewhere) gets pose 0 and no gradient through its pose.
    So all children off give parents of activation 0 and pose 0, with
    finite gradients (also in float16). Routing is computed in float32
    under mixed precision.

    Args:
        num_capsules: int. Number of parent capsules `M`.
        capsule_dim: int. Pose size `z` of each parent.
        input_format: `"capsules"` (pose then activation on the last axis)
            or `"vectors"` (activation = length). Defaults to
            `"capsules"`.
        output_format: `"capsules"` (`(batch, M, z + 1)`, pose then
            activation) or `"vectors"` (`(batch, M, z)`, length =
            activation). Defaults to `"capsules"`.
        pose_initializer: Initializer for `W_pose`, of shape `(N, d, M,
            z)`. Defaults to `None`: uniform with variance `1 / d`, so a
            vote keeps its child's scale.
        route_initializer: Initializer for `W_route` `(N, d, M)`.
            Defaults to `"zeros"`.
        bias_initializer: Initializer for `b_route` `(N, M)`. Defaults to
            `"zeros"`.
        pose_regularizer, route_regularizer, bias_regularizer: Regularizers
            for these weights. Default to `None`.
        pose_constraint, route_constraint, bias_constraint: Constraints for
            these weights. Default to `None`.
        temperature: float. Routing temperature, above 0, dividing the
            routing logits. Defaults to `1.0`, the paper's routing.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: The children, `(batch, N, d + 1)` (or `(batch, N, d)` with
            `input_format="vectors"`), or a capsule map `(batch, H, W, B,
            d + 1)` whose `N = H * W * B` capsules are all children, each
            with its own weights (the paper's class-capsule layer).
        return_couplings: bool. Also return the couplings `c` in the
            `Router` layout `(batch, 1, N, M)`, summing to 1 over the
            parents. Defaults to `False`.

    Returns:
        The parents, `(batch, M, z + 1)` or `(batch, M, z)`; with
        `return_couplings=True`, `(parents, couplings)`. `routing_trace`
        returns the single pass, its routing logits as the agreement, and
        the votes `(batch, N, M, z)`.

    Example:

    >>> layer = keras_caps.layers.SelfRouting(num_capsules=10,
    ...                                       capsule_dim=16)
    >>> children = np.full((2, 32, 9), 0.5)  # 8-D poses, activation 0.5
    >>> tuple(layer(children).shape)
    (2, 10, 17)

    Reference:
    - [Hahn et al., 2019](http://vision.snu.ac.kr/projects/self-routing),
      "Self-Routing Capsule Networks", NeurIPS 2019
    """

    def __init__(self, num_capsules, capsule_dim, input_format="capsules",
                 output_format="capsules", pose_initializer=None,
                 route_initializer="zeros", bias_initializer="zeros",
                 pose_regularizer=None, route_regularizer=None,
                 bias_regularizer=None, pose_constraint=None,
                 route_constraint=None, bias_constraint=None,
                 temperature=1.0, **kwargs):
        check_choice("input_format", input_format, INPUT_FORMATS)
        check_choice("output_format", output_format, OUTPUT_FORMATS)
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.input_format = input_format
        self.output_format = output_format
        set_initializers(self, pose_initializer, route_initializer,
                         bias_initializer)
        set_regularizers_and_constraints(
            self, pose=(pose_regularizer, pose_constraint),
            route=(route_regularizer, route_constraint),
            bias=(bias_regularizer, bias_constraint))

    def int8_kernel_axes(self):
        """The vote kernel, for `quantize("int8")` (see `Int8Kernels`)."""
        # (*children, d, j, z): the children's d is contracted.
        return {"pose_kernel": (len(self.kernel_value("pose_kernel").shape)
                                - 3,)}

    def build_router(self, input_shape):
        self._check_input_shape(input_shape)
        input_shape = tuple(input_shape)
        num_children = math.prod(input_shape[1:-1])
        pose_dim = pose_size(input_shape, self.input_format)
        add_self_routing_weights(self, (num_children,), pose_dim)
        self.input_spec = keras.InputSpec(
            ndim=len(input_shape),
            axes={axis: size for axis, size in enumerate(input_shape)
                  if axis > 0})

    def compute_routing(self, inputs, keep_passes=False):
        self._check_input_shape(inputs.shape)
        poses, activations = split_capsules(inputs, self.input_format)
        num_children = self.route_kernel.shape[0]
        # (b, x = 1, i, d) and (b, 1, i): one "position" holding all
        # children, the convolutional form's layout.
        poses = ops.reshape(poses, (-1, 1, num_children, poses.shape[-1]))
        activations = ops.reshape(activations, (-1, 1, num_children))
        routed = self_route(self, poses, activations, keep_passes)
        parents = ops.squeeze(routed.outputs, 1)  # (b, j, z + 1) or (b, j, z)
        return RoutingPasses(outputs=parents, couplings=routed.couplings,
                             agreement=routed.agreement, votes=routed.votes)

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], self.num_capsules,
                output_size(self.capsule_dim, self.output_format))

    def compute_couplings_shape(self, input_shape):
        return (input_shape[0], 1, math.prod(input_shape[1:-1]),
                self.num_capsules)

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) not in (3, 5):
            raise ValueError(
                "Received an invalid shape for `inputs` of `SelfRouting`, "
                "expected capsules (batch, num_input_capsules, last) or a "
                "capsule map (batch, height, width, num_input_types, last), "
                f"last = pose size + 1 with input_format='capsules'. "
                f"Received: input_shape={input_shape}")
        check_known_shape(input_shape, type(self).__name__)
        pose_size(input_shape, self.input_format)
        check_built_shape(self, input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"input_format": self.input_format,
                       "output_format": self.output_format})
        config.update(serialize_self_routing_weights(self))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per child `i` and parent `j` (Hahn et al., 2019, Section 3): the
        routing logit `W_route[i] u_i`, `d`; the vote `W_pose[i, j] u_i`,
        `d * capsule_dim`; the weighted pose sum, `capsule_dim` (the
        activation sums only add).
        """
        pose_dim = pose_size(input_shape, self.input_format)
        return self._child_parent_pairs(input_shape) * (
            pose_dim * (self.capsule_dim + 1) + self.capsule_dim)


# --- Shared with `ConvSelfRouting` ---------------------------------------
# b: batch, x: output positions (1 when fully connected), i: children of a
# position, d: child pose size, j: parents, z: parent pose size.


def set_initializers(layer, pose, route, bias):
    """Stores the three initializers (`None` for `W_pose`: see `build`)."""
    layer.pose_initializer = (None if pose is None
                              else keras.initializers.get(pose))
    layer.route_initializer = keras.initializers.get(route)
    layer.bias_initializer = keras.initializers.get(bias)


def add_self_routing_weights(layer, children_shape, pose_dim):
    """`pose_kernel` `(*children, d, M, z)`, `route_kernel` `(*children, d,
    M)` and `route_bias` `(*children, M)`; `children_shape` is `(N,)` or
    the convolutional `(k_h, k_w, B)`."""
    pose_initializer = layer.pose_initializer
    if pose_initializer is None:
        limit = math.sqrt(3.0 / pose_dim)  # variance 1 / d
        pose_initializer = keras.initializers.RandomUniform(-limit, limit)
    parents = layer.num_capsules
    # The routing weights stay float32 under mixed precision (autocast
    # off): the logits and the softmax are computed in float32.
    layer.pose_kernel = layer.add_weight(
        name="pose_kernel",
        shape=(*children_shape, pose_dim, parents, layer.capsule_dim),
        initializer=pose_initializer, regularizer=layer.pose_regularizer,
        constraint=layer.pose_constraint)
    layer.route_kernel = layer.add_weight(
        name="route_kernel", shape=(*children_shape, pose_dim, parents),
        initializer=layer.route_initializer,
        regularizer=layer.route_regularizer,
        constraint=layer.route_constraint, autocast=False)
    layer.route_bias = layer.add_weight(
        name="route_bias", shape=(*children_shape, parents),
        initializer=layer.bias_initializer,
        regularizer=layer.bias_regularizer, constraint=layer.bias_constraint,
        autocast=False)


def serialize_self_routing_weights(layer):
    """The config entries of the initializers, regularizers, constraints."""
    config = {
        "pose_initializer": (
            None if layer.pose_initializer is None
            else keras.initializers.serialize(layer.pose_initializer)),
        "route_initializer":
            keras.initializers.serialize(layer.route_initializer),
        "bias_initializer":
            keras.initializers.serialize(layer.bias_initializer),
    }
    config.update(serialize_regularizers_and_constraints(layer, WEIGHTS))
    return config


def pose_size(input_shape, input_format):
    """The children's pose size `d` from the last axis; raises if none."""
    last = input_shape[-1]
    pose_dim = last - 1 if input_format == "capsules" else last
    if pose_dim < 1:
        expected = ("pose entries followed by the activation, at least 2"
                    if input_format == "capsules" else "at least 1")
        raise ValueError(
            "Received an invalid last axis of `inputs`, expected "
            f"{expected} with input_format={input_format!r}. Received: "
            f"input_shape={tuple(input_shape)}")
    return pose_dim


def output_size(capsule_dim, output_format):
    """The parents' last axis: the pose, and the activation if capsules."""
    return capsule_dim + 1 if output_format == "capsules" else capsule_dim


def check_known_shape(input_shape, name):
    if any(size is None for size in input_shape[1:]):
        raise ValueError(
            f"`{name}` needs every dimension but the batch size to be "
            f"known. Received: input_shape={input_shape}")


def check_built_shape(layer, input_shape):
    """Raises if `layer` was built for inputs of another shape."""
    if layer.input_spec is None:
        return
    built = tuple(layer.input_spec.axes[axis]
                  for axis in range(1, layer.input_spec.ndim))
    if len(input_shape) != layer.input_spec.ndim or (
            tuple(input_shape[1:]) != built):
        raise ValueError(
            f"`{type(layer).__name__}` {layer.name!r} was built for "
            f"inputs of shape {(None, *built)}, expected that shape. "
            f"Received: input_shape={tuple(input_shape)}")


def split_capsules(inputs, input_format):
    """Poses (compute dtype) and float32 activations of the children."""
    if input_format == "capsules":
        poses = inputs[..., :-1]
        activations = capsule_ops.at_least_float32(inputs[..., -1])
    else:
        poses = inputs
        activations = capsule_ops.capsule_length(
            capsule_ops.at_least_float32(inputs), epsilon=LENGTH_EPSILON)
    return poses, activations


def self_route(layer, poses, activations, keep_votes):
    """Self-routing of the children of each output position.

    Args:
        layer: The router (its weights, temperature and output format).
        poses: `(b, x, i, d)` in the compute dtype.
        activations: `(b, x, i)` float32, not negative.
        keep_votes: bool. Also return the votes `(b, x * i, j, z)`.

    Returns:
        A `RoutingPasses` whose outputs are `(b, x, j, z + 1)` (or `(b, x,
        j, z)` for vector outputs) and whose couplings and agreement are
        float32 `(b, 1, x * i, j)`.
    """
    num_children = poses.shape[2]
    pose_dim = poses.shape[-1]
    pose_kernel = ops.reshape(ops.cast(
        layer.kernel_value("pose_kernel"), poses.dtype), (
        num_children, pose_dim, layer.num_capsules, layer.capsule_dim))
    route_kernel = ops.reshape(layer.route_kernel, (
        num_children, pose_dim, layer.num_capsules))
    route_bias = ops.reshape(layer.route_bias,
                             (num_children, layer.num_capsules))
    # (b, x, i, d) @ (i, d, j) -> (b, x, i, j): each child's routing logits.
    logits = ops.einsum("bxid,idj->bxij",
                        capsule_ops.at_least_float32(poses),
                        route_kernel) + route_bias
    couplings = layer.tempered_softmax(logits, axis=-1)
    weights, parent_activations = mixture_weights(couplings, activations)
    parent_poses = mix_votes(weights, poses, pose_kernel)
    votes = None
    if keep_votes:
        votes = ops.einsum("bxid,idjz->bxijz", poses, pose_kernel)
        votes = ops.reshape(votes, (-1, votes.shape[1] * num_children,
                                    layer.num_capsules, layer.capsule_dim))
    return RoutingPasses(
        outputs=assemble_parents(parent_poses, parent_activations,
                                 layer.output_format),
        couplings=[_router_layout(couplings)],
        agreement=[_router_layout(logits)], votes=votes)


def mix_votes(weights, poses, pose_kernel):
    """`sum_i w[i, j] W_pose[i, j] u[i]`, `(b, x, j, z)`, without the votes.

    The weighted children are built parents first, `(j, b * x, i * d)`, so
    the contraction with `W_pose` is one batched matrix product over the
    parents that reads them in place (no transposed copy of them).

    Args:
        weights: `(b, x, i, j)` float32 mixture weights.
        poses: `(b, x, i, d)`.
        pose_kernel: `(i, d, j, z)`, in the dtype of the poses.
    """
    num_positions, num_children, pose_dim = poses.shape[1:]
    num_parents, capsule_dim = pose_kernel.shape[2:]
    # (b, x, i, j) -> (j, b * x, i, 1): small next to the weighted children.
    weights = ops.reshape(ops.cast(weights, poses.dtype),
                          (-1, num_children, num_parents))
    weights = ops.expand_dims(ops.transpose(weights, (2, 0, 1)), -1)
    poses = ops.reshape(poses, (1, -1, num_children, pose_dim))
    # (j, b * x, i, 1) * (1, b * x, i, d) -> (j, b * x, i * d)
    weighted = ops.reshape(weights * poses,
                           (num_parents, -1, num_children * pose_dim))
    kernel = ops.reshape(ops.transpose(pose_kernel, (2, 0, 1, 3)), (
        num_parents, num_children * pose_dim, capsule_dim))
    mixed = ops.matmul(weighted, kernel)  # (j, b * x, z)
    return ops.reshape(ops.transpose(mixed, (1, 0, 2)),
                       (-1, num_positions, num_parents, capsule_dim))


def mixture_weights(couplings, activations):
    """The mixture weights and the parents' activations (float32).

    Args:
        couplings: `(..., i, j)`, summing to 1 over `j`.
        activations: `(..., i)`, not negative.

    Returns:
        `weights` `(..., i, j)`, `r[i, j] / sum_i r[i, j]` with `r[i, j] =
        c[i, j] a[i]`, and the parents' activations `(..., j)`, `sum_i
        r[i, j] / sum_i a[i]`. Below `ACTIVATION_FLOOR`: the children's
        total activation is taken as the floor (the parents' activations
        fall linearly to 0), and a parent whose weighted activation is
        below it gets weights 0 (pose 0, no gradient through the 0 / 0).
    """
    routed = couplings * ops.expand_dims(activations, -1)  # (..., i, j)
    parent_mass = ops.sum(routed, axis=-2)  # (..., j)
    total = ops.sum(activations, axis=-1, keepdims=True)  # (..., 1)
    parent_activations = parent_mass / ops.maximum(total, ACTIVATION_FLOOR)
    reached = ops.expand_dims(parent_mass > ACTIVATION_FLOOR, -2)
    safe_mass = ops.where(reached, ops.expand_dims(parent_mass, -2), 1.0)
    weights = ops.where(reached, routed / safe_mass, 0.0)
    return weights, parent_activations


def assemble_parents(poses, activations, output_format):
    """`(..., j, z + 1)` pose then activation, or the `(..., j, z)` vector
    `a * u / ||u||` whose length is the activation."""
    dtype = poses.dtype
    if output_format == "capsules":
        return ops.concatenate(
            [poses, ops.expand_dims(ops.cast(activations, dtype), -1)],
            axis=-1)
    wide = capsule_ops.at_least_float32(poses)
    length = capsule_ops.safe_norm(wide, axis=-1, keepdims=True,
                                   epsilon=LENGTH_EPSILON)
    return ops.cast(wide * (ops.expand_dims(activations, -1) / length),
                    dtype)


def _router_layout(tensor):
    """(b, x, i, j) -> (b, 1, x * i, j), the `Router` layout."""
    return ops.reshape(tensor, (-1, 1, tensor.shape[1] * tensor.shape[2],
                                tensor.shape[3]))
