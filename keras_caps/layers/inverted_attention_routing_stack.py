import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.inverted_attention_routing import (
    InvertedAttentionRouting,
)
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int

SCHEDULES = ("concurrent", "sequential")


@keras_caps_export("keras_caps.layers.InvertedAttentionRoutingStack")
class InvertedAttentionRoutingStack(keras.layers.Layer):
    """A stack of `InvertedAttentionRouting` layers routed together.

    The paper routes all capsule layers of a network at once: a first pass
    initialises every layer bottom-up with uniform couplings, then each of
    the remaining `num_iterations - 1` passes updates **every** layer from
    the previous pass's states (a Jacobi-style sweep: layer `L` reads the
    old children `p[L - 1]` and the old parents `p[L]`). This is
    `CapsModel.forward` of the official code and the paper's Procedure 1;
    the stack runs that loop, so a functional model gets concurrent routing
    from a single layer call.

    ```
    p[0] = inputs                                     # fixed during routing
    for L = 1..num_layers:  p[L] = step_L(p[L - 1], parents=None)  # uniform
    concurrent (default), repeat num_iterations - 1 times:
        p[L] = step_L(p_old[L - 1], parents=p_old[L])  for every L at once
    sequential:
        for L = 1..num_layers:
            q = step_L(p[L - 1], None)
            repeat num_iterations - 1 times: q = step_L(p[L - 1], q)
            p[L] = q
    outputs = p[num_layers]
    ```

    `step_L` is one pass of layer `L` (votes, agreement scaled by
    `1 / sqrt(d)`, softmax over parents, weighted sum, LayerNorm): the
    layer's `route`, on the votes from its `votes`. `num_iterations`
    counts the initialisation pass (`1` means no agreement-based routing)
    and replaces each layer's own `num_iterations`. Votes whose children
    do not change are computed once, and the last concurrent pass only
    updates the top layer (the others' updates would be unused); both
    leave the results unchanged.

    Args:
        layers: list of `InvertedAttentionRouting` layers (or their
            serialized dicts), bottom to top. A convolutional layer cannot
            follow a fully-connected one, and matrix-pose layers need the
            pose size of the layer below.
        num_iterations: int. Routing passes, counting the uniform first
            pass. Defaults to `2`, the paper's CIFAR runs.
        schedule: str. `"concurrent"` (the paper's) or `"sequential"`
            (each layer routed to convergence before the next starts).
            Defaults to `"concurrent"`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.
            The stack computes in its own compute dtype.

    Call arguments:
        inputs: The children of the bottom layer (e.g. primary capsules
            `(batch, H, W, N, d)` after their LayerNorm).
        training: bool. Whether dropout is active.
        return_couplings: bool. Also return, for each layer bottom to top,
            the couplings of its last routing pass in the `Router` layout
            `(batch, 1, children, parents)` (concurrently, the last sweep
            updates only the top layer, so a lower layer's couplings are
            those of the sweep before, the ones its outputs came from).
            Defaults to `False`.

    Returns:
        The poses of the top layer, of its output shape; with
        `return_couplings`, `(poses, [couplings of each layer])`. The
        stack is not a `Router` itself: its layers are, and hold the
        temperatures (`RoutingTemperatureScheduler` finds them inside it).

    Example:

    >>> stack = keras_caps.layers.InvertedAttentionRoutingStack([
    ...     keras_caps.layers.InvertedAttentionRouting(
    ...         4, 4, kernel_size=3, strides=2),
    ...     keras_caps.layers.InvertedAttentionRouting(10, 4),
    ... ], num_iterations=3)
    >>> tuple(stack(np.zeros((2, 7, 7, 3, 4))).shape)
    (2, 10, 4)

    Reference:
    - [Tsai et al., 2020](https://arxiv.org/abs/2002.04764)
    """

    def __init__(self, layers, num_iterations=2, schedule="concurrent",
                 **kwargs):
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError(
                "Received an invalid value for `layers`, expected a non-empty "
                "list of `InvertedAttentionRouting` layers. Received: "
                f"layers={layers!r}")
        layers = [_deserialize(layer) for layer in layers]
        for index, layer in enumerate(layers):
            if not isinstance(layer, InvertedAttentionRouting):
                raise TypeError(
                    "Received an invalid type for `layers`, expected "
                    "`InvertedAttentionRouting` layers. Received: "
                    f"layers[{index}]={layer!r} of type "
                    f"{type(layer).__name__}")
        if len({id(layer) for layer in layers}) != len(layers):
            raise ValueError(
                "Received an invalid value for `layers`: the same layer "
                "appears twice, which would share its weights. Received: "
                f"layers={[layer.name for layer in layers]}")
        for index in range(1, len(layers)):
            if (layers[index].kernel_size is not None
                    and layers[index - 1].kernel_size is None):
                raise ValueError(
                    "Received an invalid value for `layers`: a "
                    "convolutional layer needs a capsule map, but "
                    f"layers[{index - 1}] is fully connected. Received: "
                    f"layers[{index}] with kernel_size="
                    f"{layers[index].kernel_size}")
        num_iterations = check_positive_int("num_iterations", num_iterations)
        check_choice("schedule", schedule, SCHEDULES)
        super().__init__(**kwargs)
        self.layers = layers
        self.num_iterations = num_iterations
        self.schedule = schedule

    def build(self, input_shape):
        for index, shape in enumerate(self._layer_input_shapes(input_shape)):
            layer = self.layers[index]
            if not layer.built:
                layer.build(shape)
                continue
            # The stack calls the layers' routing steps, past their input
            # specs: check a layer built elsewhere here, while building.
            spec = layer.input_spec
            built = (None,) + tuple(spec.axes[axis]
                                    for axis in range(1, spec.ndim))
            if tuple(shape[1:]) != built[1:]:
                raise ValueError(
                    f"`{type(self).__name__}` feeds layers[{index}] "
                    f"({layer.name}) inputs of shape {tuple(shape)}, but "
                    f"that layer was already built for {built}. Received: "
                    f"input_shape={tuple(input_shape)}")

    def call(self, inputs, training=None, return_couplings=False):
        if self.schedule == "sequential":
            poses, couplings = self._route_sequentially(inputs, training)
        else:
            poses, couplings = self._route_concurrently(inputs, training)
        if return_couplings:
            return poses, couplings
        return poses

    def _route_sequentially(self, inputs, training):
        """Each layer to convergence in turn: top poses, last couplings."""
        dtype = inputs.dtype
        poses, couplings = inputs, []
        for layer in self.layers:
            votes = layer.votes(poses)
            parents, last = layer.route(votes, training=training,
                                        return_couplings=True)
            for _ in range(self.num_iterations - 1):
                parents, last = layer.route(votes, parents, training=training,
                                            return_couplings=True)
            couplings.append(last)
            poses = ops.cast(parents, dtype)
        return poses, couplings

    def _route_concurrently(self, inputs, training):
        """The paper's sweep: top poses, each layer's last couplings."""
        layers, dtype = self.layers, inputs.dtype
        # `parents[L]` are layer L's outputs; `children[L]` its inputs,
        # i.e. the previous layer's outputs.
        bottom_votes = layers[0].votes(inputs)  # fixed during routing
        parents, children, couplings = [], [inputs], []
        for index, layer in enumerate(layers):
            votes = bottom_votes if index == 0 else layer.votes(
                children[index])
            poses, last = layer.route(votes, training=training,
                                      return_couplings=True)
            parents.append(poses)
            couplings.append(last)
            children.append(ops.cast(poses, dtype))
        for iteration in range(self.num_iterations - 1):
            is_last = iteration == self.num_iterations - 2
            new_parents = []
            for index, layer in enumerate(layers):
                if is_last and index < len(layers) - 1:
                    new_parents.append(parents[index])  # never read again
                    continue
                votes = bottom_votes if index == 0 else layer.votes(
                    children[index])
                poses, couplings[index] = layer.route(
                    votes, parents[index], training=training,
                    return_couplings=True)
                new_parents.append(poses)
            parents = new_parents
            children = [inputs] + [ops.cast(poses, dtype)
                                   for poses in parents]
        return children[-1], couplings

    def _layer_input_shapes(self, input_shape):
        """Each layer's input shape; raises on incompatible neighbours."""
        shapes, shape = [], tuple(input_shape)
        for index, layer in enumerate(self.layers):
            try:
                output_shape = layer.compute_output_shape(shape)
            except ValueError as error:
                source = ("its inputs" if index == 0
                          else f"the outputs of layers[{index - 1}]")
                raise ValueError(
                    f"`{type(self).__name__}` cannot feed layers[{index}] "
                    f"({layer.name}) with {source}: {error}") from None
            shapes.append(shape)
            shape = tuple(output_shape)
        return shapes

    def compute_output_shape(self, input_shape):
        last_input_shape = self._layer_input_shapes(input_shape)[-1]
        return tuple(self.layers[-1].compute_output_shape(
            last_input_shape))

    def compute_output_spec(self, inputs, training=None,
                            return_couplings=False):
        shape = tuple(inputs.shape)
        outputs = keras.KerasTensor(self.compute_output_shape(shape),
                                    dtype=self.compute_dtype)
        if not return_couplings:
            return outputs
        couplings = [
            keras.KerasTensor(layer.compute_couplings_shape(layer_shape),
                              dtype="float32")
            for layer, layer_shape in zip(
                self.layers, self._layer_input_shapes(shape))]
        return outputs, couplings

    def get_config(self):
        config = super().get_config()
        config.update({
            "layers": [keras.saving.serialize_keras_object(layer)
                       for layer in self.layers],
            "num_iterations": self.num_iterations,
            "schedule": self.schedule,
        })
        return config


def _deserialize(layer):
    if isinstance(layer, dict):
        return keras.saving.deserialize_keras_object(layer)
    return layer
