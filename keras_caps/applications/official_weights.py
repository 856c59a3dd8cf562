"""Loading the official Efficient-CapsNet and CapsNet Keras 2 HDF5 weights.

The official Efficient-CapsNet repository (github.com/EscVM/Efficient-CapsNet)
ships its trained models as Keras 2 HDF5 weight files:
`bin/efficient_capsnet_{MNIST,SMALLNORB,MULTIMNIST}.h5` and
`bin/original_capsnet_MNIST.h5`. Each holds two nested models: the capsule
network (a group named e.g. `Efficient_CapsNet`, `CapsNet` or
`Original_CapsNet`) and the reconstruction decoder (`Generator`). Their layer
names differ from ours, so the weights are mapped by layer order and checked
by shape. Two layouts differ from ours and are converted:

- Efficient-CapsNet's primary capsules are a grouped convolution with kernel
  `(k, k, 1, C)`; ours are a depthwise convolution, kernel `(k, k, C, 1)`.
- The original CapsNet's class-capsule matrices are `(N_in, D_in, N_out *
  D_out)` with the primary capsules ordered `(h, w, type)`; ours are
  `(N_in, D_in, N_out, D_out)` in the order of our `ConvPrimaryCaps`
  (`(type, h, w)` in the `CapsNet` builder), so the input axis is permuted.
  Routing sums over the input capsules, so the outputs are unchanged.

Only `h5py`, NumPy and Keras are used here.
"""

import os

import keras
import numpy as np

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export

DECODER_GROUP = "Generator"

# Weights within a layer are paired in this order, whatever order the file
# or the layer lists them in (Keras 2 lists a nested model's non-trainable
# weights, e.g. the batch-norm statistics, after all its trainable ones).
_WEIGHT_RANK = {
    "kernel": 0, "depthwise_kernel": 0, "W": 0,
    "bias": 1, "biases": 1, "b": 1, "prior": 1,
    "gamma": 2, "beta": 3, "moving_mean": 4, "moving_variance": 5,
}


@keras_caps_export("keras_caps.applications.load_official_weights")
def load_official_weights(model, path):
    """Loads an official Efficient-CapsNet or CapsNet HDF5 weights file.

    Reads the Keras 2 HDF5 weights that the official Efficient-CapsNet code
    saves (`bin/efficient_capsnet_MNIST.h5`, `..._SMALLNORB.h5`,
    `..._MULTIMNIST.h5`, `original_capsnet_MNIST.h5`) into a model built by
    `EfficientCapsNet` or `CapsNet` for the same dataset. The capsule
    network's layers are matched to the model's layers with weights in
    order (the input scaling excluded), the `Generator` group's to the
    model's `"decoder"`; every weight must have the shape the model
    expects. The primary-capsule kernel is converted from the official
    grouped-convolution layout `(k, k, 1, C)` to the depthwise `(k, k, C,
    1)`, and the original CapsNet's vote matrices from `(N_in, D_in, N_out
    * D_out)` in `(h, w, type)` capsule order to ours. A model without a
    decoder ignores the `Generator` group.

    Everything is read and checked before any weight is assigned, so after
    an error the model keeps its weights.

    Input scaling: the official graphs take scaled images (MNIST pixels /
    256, MultiMNIST / 255, smallNORB standardised per channel), while our
    models scale raw pixels (0-255) inside the model. The loaded model
    therefore takes raw pixels; for smallNORB, build it with
    `input_statistics=` (training statistics for raw pixels, or
    `((0, 0), (1, 1))` to feed images standardised as the official code
    does).

    Args:
        model: A `keras.Model` from `EfficientCapsNet` or `CapsNet` whose
            architecture matches the file (same dataset preset).
        path: str or path-like. The official `.h5` weights file.

    Returns:
        `model`, with the official weights.

    Raises:
        FileNotFoundError: when `path` does not exist.
        ValueError: when the file is not a complete Keras 2 HDF5 weights
            file, or belongs to another model or dataset (the message names
            the file, the first layer that does not fit and both shapes).

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet(  # doctest: +SKIP
    ...     "smallnorb", input_statistics=((0, 0), (1, 1)),
    ...     reconstruction=False)
    >>> keras_caps.applications.load_official_weights(  # doctest: +SKIP
    ...     model, "efficient_capsnet_SMALLNORB.h5")
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "`model` must be a keras.Model built by EfficientCapsNet or "
            f"CapsNet. Received: model of type {type(model).__name__}")
    path = _check_path(path)
    network_layers, decoder_layers = _read_official_file(path)
    network_targets, decoder = _target_layers(model)
    staged = _stage(path, network_layers, network_targets, "capsule network")
    if decoder is not None:
        if decoder_layers is None:
            raise ValueError(
                f"The official weights file {path!r} has no "
                f"'{DECODER_GROUP}' group, but the model has a decoder. "
                "Build the model with reconstruction=False to load only the "
                "capsule network.")
        decoder_targets = [layer for layer in decoder.layers if layer.weights]
        staged += _stage(path, decoder_layers, decoder_targets, "decoder")
    for variable, value in staged:
        variable.assign(value)
    return model


def check_weights_arguments(builder, weights, preset, input_shape,
                            num_classes, input_statistics=None):
    """Checks a builder's `weights=` against the options it is given with.

    Official weights fit the preset's architecture only, so `input_shape`
    and `num_classes` must be the preset's; presets that standardise their
    input need `input_statistics`.
    """
    if weights is None:
        return
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(
            "`weights` must be the path of an official .h5 weights file or "
            f"None. Received: weights of type {type(weights).__name__}")
    changed = []
    if (input_shape is not None
            and tuple(input_shape) != tuple(preset["input_shape"])):
        changed.append(f"input_shape={tuple(input_shape)} (the preset's is "
                       f"{tuple(preset['input_shape'])})")
    if num_classes is not None and num_classes != preset["num_classes"]:
        changed.append(f"num_classes={num_classes} (the preset's is "
                       f"{preset['num_classes']})")
    if changed:
        raise ValueError(
            f"{builder}(weights=...) loads official weights, which fit the "
            "preset's architecture only; these options change it: "
            f"{', '.join(changed)}. Received: weights={weights!r}")
    if preset["input_scaling"] == "standardize" and input_statistics is None:
        raise ValueError(
            f"{builder}(weights=...) for a preset that standardises its "
            "input needs `input_statistics`: the official weights expect "
            "standardised images. Pass the training images' statistics "
            "(e.g. keras_caps.datasets.smallnorb.training_statistics()) to "
            "feed raw pixels, or ((0, 0), (1, 1)) to feed images that are "
            f"already standardised. Received: weights={weights!r}, "
            "input_statistics=None")


def _check_path(path):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "`path` must be the path of an official .h5 weights file. "
            f"Received: path of type {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No official weights file at `path`. Received: path={path!r}")
    return path


class _OfficialLayer:
    """The weights of one layer of the file: `(kind, array)` in file order."""

    def __init__(self, name):
        self.name = name
        self.weights = []


def _read_official_file(path):
    """The file's capsule-network layers and its decoder layers (or None).

    Every array is read here, so a truncated file fails before any weight
    is assigned.
    """
    import h5py

    try:
        with h5py.File(path, "r") as file:
            root = file["model_weights"] if "model_weights" in file else file
            if "layer_names" not in root.attrs:
                raise ValueError(
                    f"{path!r} is an HDF5 file but not a Keras 2 weights "
                    "file (it has no 'layer_names' attribute). Official "
                    "Efficient-CapsNet weights are Keras 2 HDF5 files; load "
                    "Keras 3 `.weights.h5` files with `model.load_weights`.")
            network, decoder = [], None
            for group_name in _strings(root.attrs["layer_names"]):
                group = root[group_name]
                weight_names = _strings(group.attrs.get("weight_names", []))
                if not weight_names:
                    continue
                official = _group_layers(group, group_name, weight_names)
                if group_name == DECODER_GROUP:
                    decoder = official
                else:
                    network += official
    except OSError as error:
        raise ValueError(
            f"Cannot read the official weights file {path!r}: it is not a "
            f"complete HDF5 file (truncated or another format). ({error})"
        ) from None
    except KeyError as error:
        raise ValueError(
            f"The official weights file {path!r} is incomplete: a weight it "
            f"lists is missing. ({error})") from None
    if not network:
        raise ValueError(
            f"The official weights file {path!r} holds no capsule network "
            "weights (only a decoder, or nothing).")
    return network, decoder


def _group_layers(group, group_name, weight_names):
    """Groups `weight_names` of a model group by layer, in order."""
    by_layer = {}
    for weight_name in weight_names:
        layer_name, _, kind = weight_name.rpartition("/")
        kind = kind.split(":")[0]
        if layer_name not in by_layer:
            by_layer[layer_name] = _OfficialLayer(
                f"{group_name}/{layer_name}" if layer_name else group_name)
        value = np.asarray(group[weight_name][()])
        by_layer[layer_name].weights.append((kind, value))
    return list(by_layer.values())


def _strings(values):
    return [value.decode("utf8") if isinstance(value, bytes) else str(value)
            for value in np.asarray(values).reshape(-1)]


def _target_layers(model):
    """The model's capsule-network layers with weights, and its decoder."""
    decoder = None
    network = []
    for layer in model.layers:
        if layer.name == roles.DECODER and isinstance(layer, keras.Model):
            decoder = layer
        elif layer.name != roles.INPUT_SCALING and layer.weights:
            network.append(layer)
    if not network:
        raise ValueError(
            "The model has no layers with weights to load official weights "
            f"into. Received: model named {model.name!r}")
    return network, decoder


def _loadable_weights(layer):
    """`layer.weights` but its routing temperature, which files lack."""
    temperature = getattr(layer, "temperature_variable", None)
    return [weight for weight in layer.weights if weight is not temperature]


def _sorted_weights(weights, kind_of):
    return sorted(weights, key=lambda w: _WEIGHT_RANK.get(kind_of(w), 9))


def _stage(path, official_layers, targets, part):
    """`(variable, value)` pairs for `targets`, after checking every shape."""
    staged = []
    for index, target in enumerate(targets):
        if index >= len(official_layers):
            expected = [tuple(v.shape) for v in _loadable_weights(target)]
            raise ValueError(
                f"The official weights file {path!r} does not fit this "
                f"model: its {part} has {len(official_layers)} layers with "
                f"weights, but the model's {part} has {len(targets)}; "
                f"layer {target.name!r} (weights {expected}) has no "
                "counterpart in the file. The file belongs to another model "
                "or dataset.")
        official = official_layers[index]
        staged += _stage_layer(path, official, target, targets)
    if len(official_layers) > len(targets):
        extra = official_layers[len(targets)]
        raise ValueError(
            f"The official weights file {path!r} does not fit this model: "
            f"its {part} has {len(official_layers)} layers with weights, "
            f"but the model's has {len(targets)}; the file's layer "
            f"{extra.name!r} (weights "
            f"{[value.shape for _, value in extra.weights]}) has no "
            "counterpart in the model. The file belongs to another model or "
            "dataset.")
    return staged


def _stage_layer(path, official, target, targets):
    file_weights = _sorted_weights(official.weights, lambda w: w[0])
    variables = _sorted_weights(_loadable_weights(target),
                                lambda v: v.name)
    if len(file_weights) != len(variables):
        raise ValueError(
            f"The official weights file {path!r} does not fit this model: "
            f"its layer {official.name!r} has {len(file_weights)} weights "
            f"of shapes {[value.shape for _, value in file_weights]}, but "
            f"the model's layer {target.name!r} has {len(variables)} of "
            f"shapes {[tuple(v.shape) for v in variables]}. The file "
            "belongs to another model or dataset.")
    staged = []
    for (kind, value), variable in zip(file_weights, variables):
        converter = _converter(target, variable, targets)
        expected = converter.official_shape(tuple(variable.shape))
        if tuple(value.shape) != expected:
            raise ValueError(
                f"The official weights file {path!r} does not fit this "
                f"model: its layer {official.name!r} has weight {kind!r} of "
                f"shape {tuple(value.shape)}, but the model's layer "
                f"{target.name!r} expects {expected} for it (in the "
                "official layout). The file belongs to another model or "
                "dataset.")
        staged.append((variable, converter.to_model(value).astype(
            keras.backend.standardize_dtype(variable.dtype))))
    return staged


class _SameLayout:
    """Weights stored as the model stores them."""

    def official_shape(self, shape):
        return shape

    def to_model(self, value):
        return value


class _GroupedToDepthwiseKernel:
    """Official grouped conv kernel `(k, k, 1, C)` -> depthwise `(k, k, C, 1)`.
    """

    def official_shape(self, shape):
        height, width, channels, multiplier = shape
        return (height, width, multiplier, channels)

    def to_model(self, value):
        return np.transpose(value, (0, 1, 3, 2))


class _FlatVotesKernel:
    """Official vote matrices `(N_in, D_in, N_out * D_out)`, capsules ordered
    `(h, w, type)`, -> ours `(N_in, D_in, N_out, D_out)` in the order of our
    primary capsules (`(type, h, w)` when `num_types` is given)."""

    def __init__(self, num_outputs, num_types=None):
        self.num_outputs = num_outputs
        self.num_types = num_types

    def official_shape(self, shape):
        num_inputs, input_dim, num_outputs, output_dim = shape
        return (num_inputs, input_dim, num_outputs * output_dim)

    def to_model(self, value):
        num_inputs, input_dim, flat = value.shape
        votes = value
        if self.num_types is not None:
            positions = num_inputs // self.num_types
            # (h, w, type) -> (type, h, w) order of the input capsules.
            votes = votes.reshape(positions, self.num_types, input_dim, flat)
            votes = np.transpose(votes, (1, 0, 2, 3))
        return votes.reshape(num_inputs, input_dim, self.num_outputs,
                             flat // self.num_outputs)


def _converter(target, variable, targets):
    if (isinstance(target, layers.PrimaryCaps)
            and len(variable.shape) == 4):
        return _GroupedToDepthwiseKernel()
    if (isinstance(target, layers.DynamicRouting)
            and len(variable.shape) == 4):
        primary = [layer for layer in targets
                   if isinstance(layer, layers.ConvPrimaryCaps)]
        num_types = None
        if primary and primary[0].capsule_order == "type_major":
            num_types = primary[0].num_types
        return _FlatVotesKernel(variable.shape[2], num_types)
    return _SameLayout()
