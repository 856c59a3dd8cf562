import math

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.layers.self_routing import INPUT_FORMATS
from keras_caps.layers.self_routing import OUTPUT_FORMATS
from keras_caps.layers.self_routing import add_self_routing_weights
from keras_caps.layers.self_routing import check_built_shape
from keras_caps.layers.self_routing import check_known_shape
from keras_caps.layers.self_routing import output_size
from keras_caps.layers.self_routing import pose_size
from keras_caps.layers.self_routing import self_route
from keras_caps.layers.self_routing import serialize_self_routing_weights
from keras_caps.layers.self_routing import set_initializers
from keras_caps.layers.self_routing import split_capsules
from keras_caps.validation import check_choice
from keras_caps.validation import check_int_pair
from keras_caps.validation import set_regularizers_and_constraints

PADDINGS = ("same", "valid")


@keras_caps_export("keras_caps.layers.ConvSelfRouting")
class ConvSelfRouting(Router):
    """Convolutional self-routing capsule layer (Hahn, Pyeon & Kim, 2019).

    Each parent at output position `(y, x)` is a mixture of the children
    in its `k x k` window, routed as in `SelfRouting`; the routing and vote
    weights are shared across positions, one set per (kernel offset, child
    type), as in a convolution (Hahn et al., 2019, Section 3):

    ```
    for every output position and its window children i (offset, type):
        c[i, j]  = softmax_j((W_route[i] @ u[i] + b_route[i]) / temperature)
        r[i, j]  = c[i, j] * a[i]
        a_out[j] = sum_i r[i, j] / sum_i a[i]
        u_out[j] = sum_i r[i, j] * (W_pose[i, j] @ u[i]) / sum_i r[i, j]
    ```

    With `padding="same"` the grid is padded with capsules of pose 0 and
    activation 0, which route nowhere (the authors pad their 3 x 3
    capsule convolutions by 1); the output has `ceil(H / strides)` rows,
    the smaller half of the padding on top, as Keras' convolutions (so at
    stride 2 on an even grid the window is shifted by one row and column
    from the authors' symmetric padding of 1). With
    `padding="valid"` it has `(H - k) // strides + 1`.

    Input and output formats, initialisation and the handling of children
    that are off are those of `SelfRouting`: a window whose children are
    all off gives parents of activation 0 and pose 0.

    Args:
        num_capsules: int. Parent capsule types `C` per position.
        capsule_dim: int. Pose size `z` of each parent.
        kernel_size: int or 2 ints. The window. Defaults to `3`.
        strides: int or 2 ints. Window strides. Defaults to `1`.
        padding: `"same"` or `"valid"`. Defaults to `"same"`.
        input_format: `"capsules"` (pose then activation on the last axis)
            or `"vectors"` (activation = length). Defaults to
            `"capsules"`.
        output_format: `"capsules"` or `"vectors"`, as `SelfRouting`.
            Defaults to `"capsules"`.
        pose_initializer: Initializer for `W_pose` `(k_h, k_w, B, d, C,
            z)`. Defaults to `None`: uniform with variance `1 / d`.
        route_initializer: Initializer for `W_route` `(k_h, k_w, B, d,
            C)`. Defaults to `"zeros"`.
        bias_initializer: Initializer for `b_route` `(k_h, k_w, B, C)`.
            Defaults to `"zeros"`.
        pose_regularizer, route_regularizer, bias_regularizer: Regularizers
            for these weights. Default to `None`.
        pose_constraint, route_constraint, bias_constraint: Constraints for
            these weights. Default to `None`.
        temperature: float. Routing temperature, above 0. Defaults to
            `1.0`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: A capsule map `(batch, H, W, B, d + 1)` (or `(batch, H, W,
            B, d)` with `input_format="vectors"`).
        return_couplings: bool. Also return the couplings in the `Router`
            layout `(batch, 1, H' * W' * k_h * k_w * B, C)`: one block of
            window children per output position (row-major), ordered
            kernel row, kernel column, child type; each child's couplings
            sum to 1 over the `C` parents at its position. Padding
            children are included. Defaults to `False`.

    Returns:
        The parent map `(batch, H', W', C, z + 1)` (or `(batch, H', W', C,
        z)` for vector outputs); with `return_couplings=True`, `(parents,
        couplings)`.

    Example:

    >>> layer = keras_caps.layers.ConvSelfRouting(
    ...     num_capsules=4, capsule_dim=16, kernel_size=3, strides=2)
    >>> tuple(layer(np.full((2, 8, 8, 3, 17), 0.5)).shape)
    (2, 4, 4, 4, 17)

    Reference:
    - [Hahn et al., 2019](http://vision.snu.ac.kr/projects/self-routing),
      "Self-Routing Capsule Networks", NeurIPS 2019
    """

    def __init__(self, num_capsules, capsule_dim, kernel_size=3, strides=1,
                 padding="same", input_format="capsules",
                 output_format="capsules", pose_initializer=None,
                 route_initializer="zeros", bias_initializer="zeros",
                 pose_regularizer=None, route_regularizer=None,
                 bias_regularizer=None, pose_constraint=None,
                 route_constraint=None, bias_constraint=None,
                 temperature=1.0, **kwargs):
        kernel_size = check_int_pair("kernel_size", kernel_size)
        strides = check_int_pair("strides", strides)
        check_choice("padding", padding, PADDINGS)
        check_choice("input_format", input_format, INPUT_FORMATS)
        check_choice("output_format", output_format, OUTPUT_FORMATS)
        super().__init__(num_capsules, capsule_dim, temperature=temperature,
                         **kwargs)
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
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
        pose_dim = pose_size(input_shape, self.input_format)
        add_self_routing_weights(
            self, (*self.kernel_size, input_shape[3]), pose_dim)
        self.input_spec = keras.InputSpec(
            ndim=5, axes={axis: input_shape[axis] for axis in (1, 2, 3, 4)})

    def compute_routing(self, inputs, keep_passes=False):
        self._check_input_shape(inputs.shape)
        poses, activations = split_capsules(inputs, self.input_format)
        # (b, H, W, B, d) and (b, H, W, B) -> (b, x, i, d) and (b, x, i):
        # x = H' * W' positions, i = k_h * k_w * B window children.
        poses = self._windows(poses)
        activations = ops.squeeze(
            self._windows(ops.expand_dims(activations, -1)), -1)
        routed = self_route(self, poses, activations, keep_passes)
        out_height, out_width = self._output_size(inputs.shape)
        parents = ops.reshape(routed.outputs, (
            -1, out_height, out_width, self.num_capsules,
            routed.outputs.shape[-1]))
        return RoutingPasses(outputs=parents, couplings=routed.couplings,
                             agreement=routed.agreement, votes=routed.votes)

    def _windows(self, grid):
        """`(b, H, W, B, e)` -> the children of each window `(b, x, i,
        e)`, padded with zeros for `padding="same"`."""
        shape = tuple(grid.shape)
        (top, _), (left, _) = self._padding(shape)
        out_height, out_width = self._output_size(shape)
        (kernel_h, kernel_w), (stride_h, stride_w) = (self.kernel_size,
                                                      self.strides)
        bottom = max((out_height - 1) * stride_h + kernel_h - shape[1]
                     - top, 0)
        right = max((out_width - 1) * stride_w + kernel_w - shape[2]
                    - left, 0)
        if top or bottom or left or right:
            grid = ops.pad(grid, ((0, 0), (top, bottom), (left, right),
                                  (0, 0), (0, 0)))
        slices = []
        for p in range(kernel_h):
            for q in range(kernel_w):
                # (b, H', W', B, e): the capsules at (s y + p, s x + q).
                slices.append(grid[
                    :, p:p + stride_h * (out_height - 1) + 1:stride_h,
                    q:q + stride_w * (out_width - 1) + 1:stride_w])
        windows = ops.stack(slices, axis=3)  # (b, H', W', k * k, B, e)
        return ops.reshape(windows, (
            -1, out_height * out_width, kernel_h * kernel_w * shape[3],
            shape[-1]))

    def _padding(self, input_shape):
        """`((top, out_height), (left, out_width))`."""
        sizes = []
        for size, kernel, stride in zip(input_shape[1:3], self.kernel_size,
                                        self.strides):
            if self.padding == "valid":
                sizes.append((0, (size - kernel) // stride + 1))
            else:
                out = -(-size // stride)
                total = max((out - 1) * stride + kernel - size, 0)
                sizes.append((total // 2, out))
        return tuple(sizes)

    def _output_size(self, input_shape):
        return tuple(out for _, out in self._padding(input_shape))

    def _check_input_shape(self, input_shape):
        input_shape = tuple(input_shape)
        name = type(self).__name__
        if len(input_shape) != 5:
            raise ValueError(
                f"Received an invalid shape for `inputs` of `{name}`, "
                "expected a capsule map (batch, height, width, "
                "num_input_types, last), last = pose size + 1 with "
                "input_format='capsules'. Received: "
                f"input_shape={input_shape}")
        check_known_shape(input_shape, name)
        pose_size(input_shape, self.input_format)
        height, width = input_shape[1:3]
        if self.padding == "valid" and (self.kernel_size[0] > height
                                        or self.kernel_size[1] > width):
            raise ValueError(
                "Received an invalid value for `kernel_size`, expected at "
                f"most the {height}x{width} capsule map with "
                f"padding='valid'. Received: kernel_size={self.kernel_size}, "
                f"input_shape={input_shape}")
        check_built_shape(self, input_shape)

    def compute_output_shape(self, input_shape):
        self._check_input_shape(input_shape)
        return (input_shape[0], *self._output_size(input_shape),
                self.num_capsules,
                output_size(self.capsule_dim, self.output_format))

    def compute_couplings_shape(self, input_shape):
        children = (math.prod(self._output_size(input_shape))
                    * math.prod(self.kernel_size) * input_shape[3])
        return (input_shape[0], 1, children, self.num_capsules)

    def couplings_grid(self, input_shape):
        return tuple(self._output_size(input_shape))

    def get_config(self):
        config = super().get_config()
        config.update({"kernel_size": self.kernel_size,
                       "strides": self.strides,
                       "padding": self.padding,
                       "input_format": self.input_format,
                       "output_format": self.output_format})
        config.update(serialize_self_routing_weights(self))
        return config

    def multiply_adds(self, input_shape):
        """Multiply–adds per example (`Router.multiply_adds`).

        Per window child `i` and parent `j`, over every output position
        (Hahn et al., 2019, Section 3): the routing logit
        `W_route[i] u_i`, `d`; the vote `W_pose[i, j] u_i`,
        `d * capsule_dim`; the weighted pose sum, `capsule_dim` (the
        activation sums only add).
        """
        pose_dim = pose_size(input_shape, self.input_format)
        return self._child_parent_pairs(input_shape) * (
            pose_dim * (self.capsule_dim + 1) + self.capsule_dim)
