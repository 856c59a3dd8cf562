"""The roles layers play in the models of the application builders.

Integrations find the parts of a keras_caps model by layer name: the
inference graph reads the class capsules and the lengths, the figures run
the mask and the decoder, `keras-caps evaluate` looks for the label input.
Each constant below is the name of the layer (or model input or output)
that plays one role, with the shape it produces; use them instead of
string literals. The names are part of the saved-model format: `.keras`
files, SavedModel exports and the official weights rely on them, so they
never change.

The helpers fetch a role's layer from a model and say which roles are
missing, naming the model and the layers it has.

Example:

>>> model = keras_caps.applications.EfficientCapsNet("mnist")
>>> role_layer(model, CLASS_CAPSULES).output.shape  # (batch, classes, dim)
(None, 10, 16)
>>> router_layer(model).name == CLASS_CAPSULES  # FCCaps squashes itself
True
>>> class_scores_layer(model).name
'length'
"""

import keras

IMAGE = "image"
"""The image input: raw pixels in [0, 255], `(batch, height, width,
channels)`. A model input, and the input of every SavedModel export."""

LABEL = "label"
"""The one-hot label input of models with a decoder, `(batch, classes)`
(`(batch, objects, classes)` for several objects per image, MultiMNIST).
The decoder reads the capsule of the true class while training."""

INPUT_SCALING = "input_scaling"
"""The `Rescaling` (divide by 255) or `Normalization` (standardise with
the training set's statistics) layer right after `IMAGE`, so models take
raw pixels; same shape as the images."""

CLASS_CAPSULES = "digit_caps"
"""The layer whose output is the squashed class capsules, `(batch,
classes, dim)`: the router itself when it squashes (`FCCaps` in
`EfficientCapsNet`, `DynamicRouting` in `CapsNet`, the squashing routers
of `CapsuleClassifier`), else the `Squash` after `ROUTING`."""

ROUTING = "routing"
"""The router of a `CapsuleClassifier` whose router does not squash
(`router="vector"` or `"inverted_attention"`): class capsules `(batch,
classes, dim)` before the head's layer named `CLASS_CAPSULES`: the
`Multiply` scaling each one's direction to the sigmoid of its linear score
(layer `"class_score"`), or, with `head="unsquashed"` or `"layer_norm"`
(and in models saved before that head), a `Squash` (for inverted attention
after a `Rescaling` by `1 / sqrt(dim)`)."""

CAPSULE_ROUTING = "capsule_routing"
"""The last `InvertedAttentionRouting` of `InvertedAttentionCapsNet`:
class poses `(batch, classes, dim)`, layer-normalised, not squashed."""

CLASS_ROUTING = "class_routing"
"""The `VectorRouting` of `VectorRoutingCapsNet` and `VectorRoutingHead`,
called with `return_credit=True`: `(outputs, credit)`, outputs
`(batch, classes, 1)` (the logits) and credit `(batch, inputs, classes)`.
"""

ROUTER_LAYERS = (ROUTING, CAPSULE_ROUTING, CLASS_ROUTING, CLASS_CAPSULES)
"""The names a model's router may have, in the order `router_layer`
looks for them: `CLASS_CAPSULES` is the router only when no other is."""

LENGTH = "length"
"""The float32 `Length` layer: the class scores of capsule networks, the
lengths of the class capsules `(batch, classes)` (also the name of that
output in models with a decoder)."""

LOGITS = "logits"
"""The float32 class logits `(batch, classes)` of `VectorRoutingCapsNet`,
`InvertedAttentionCapsNet` and `VectorRoutingHead`."""

PROBABILITIES = "probabilities"
"""The float32 softmax class probabilities `(batch, classes)` of
`CNNBaseline` (on presets with several objects per image, MultiMNIST, a
sigmoid per class)."""

CLASS_SCORE_LAYERS = (LENGTH, LOGITS, PROBABILITIES)
"""The names of the class-score layer, one per kind of model; every model
from an application builder has exactly one of them."""

MASK = "mask"
"""The `Mask` layer of models with a decoder: called on `[CLASS_CAPSULES
output, labels]` (or on the capsules alone: the longest), the masked
capsules flattened, `(batch, classes * dim)` (`(batch, objects, classes *
dim)` for several objects per image)."""

DECODER = "decoder"
"""The decoder, a nested `keras.Model` reading the `MASK` output:
float32 images in [0, 1], `(batch, height, width, channels)` (one image
per object, `(batch, objects, height, width, channels)`, for several)."""

RECONSTRUCTION = "reconstruction"
"""Not a layer: the name of the `DECODER`'s output in models with a
decoder, whose outputs are `{LENGTH: scores, RECONSTRUCTION: images}`."""

LAYER_ROLES = (IMAGE, LABEL, INPUT_SCALING, *ROUTER_LAYERS,
               *CLASS_SCORE_LAYERS, MASK, DECODER)
"""Every role above that a layer plays (all but `RECONSTRUCTION`)."""


def require_roles(model, roles, needed_by):
    """Raises unless `model` has a layer for each of `roles`.

    Args:
        model: A `keras.Model`.
        roles: Iterable of role names from this module, e.g.
            `(CLASS_CAPSULES, LENGTH)`.
        needed_by: str. What needs them, for the error message, e.g.
            ``"`inference_model`"``.

    Raises:
        TypeError: `model` is not a `keras.Model`.
        ValueError: a role is unknown or has no layer in `model`; the
            message names the missing roles, the model and its layers.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet(
    ...     "mnist", reconstruction=False)
    >>> require_roles(model, (CLASS_CAPSULES, LENGTH), "A test")
    >>> require_roles(model, (MASK, DECODER), "A test")
    Traceback (most recent call last):
    ...
    ValueError: A test needs a model with layers named ['decoder', 'mask']. \
Missing: ['decoder', 'mask']. Received: a model named 'efficient_capsnet' \
with layers [...]
    """
    names = _layer_names(model)
    roles = sorted(set(roles))
    unknown = [role for role in roles if role not in LAYER_ROLES]
    if unknown:
        raise ValueError(
            f"Unknown role. Expected roles from {list(LAYER_ROLES)}. "
            f"Received: roles={unknown}")
    missing = [role for role in roles if role not in names]
    if missing:
        raise ValueError(
            f"{needed_by} needs a model with layers named {roles}. "
            f"Missing: {missing}. Received: a model named {model.name!r} "
            f"with layers {names}")


def role_layer(model, role):
    """The layer of `model` that plays `role` (e.g. `CLASS_CAPSULES`).

    Raises:
        TypeError: `model` is not a `keras.Model`.
        ValueError: `role` is not one of `LAYER_ROLES`, or `model` has no
            layer for it; the message names the role, the model and its
            layers.

    Example:

    >>> model = keras_caps.applications.CapsNet("mnist")
    >>> role_layer(model, DECODER).output.shape
    (None, 28, 28, 1)
    """
    names = _layer_names(model)
    if role not in LAYER_ROLES:
        raise ValueError(
            f"Unknown `role`. Expected one of {list(LAYER_ROLES)}. "
            f"Received: role={role!r}")
    if role not in names:
        raise ValueError(
            f"The model has no layer for the {role!r} role. Received: a "
            f"model named {model.name!r} with layers {names}")
    return model.get_layer(role)


def router_layer(model):
    """The routing layer of `model`: the one computing the class outputs.

    The first layer of `model` named in `ROUTER_LAYERS`: `ROUTING`,
    `CAPSULE_ROUTING` or `CLASS_ROUTING` where the model has one, else the
    `CLASS_CAPSULES` router that squashes its own outputs.

    Raises:
        ValueError: `model` has none of them (e.g. `CNNBaseline`).

    Example:

    >>> model = keras_caps.applications.CapsuleClassifier(
    ...     "mnist", router="vector", reconstruction=False)
    >>> router_layer(model).name  # its outputs go through a Squash
    'routing'
    """
    return _first_layer(model, ROUTER_LAYERS, "router")


def class_scores_layer(model):
    """The class-score layer of `model`, `(batch, classes)`.

    The layer named in `CLASS_SCORE_LAYERS` that `model` has: `LENGTH`
    for capsule networks, `LOGITS` or `PROBABILITIES` for the others.

    Raises:
        ValueError: `model` has none of them.

    Example:

    >>> model = keras_caps.applications.VectorRoutingCapsNet("mnist")
    >>> class_scores_layer(model).name
    'logits'
    """
    return _first_layer(model, CLASS_SCORE_LAYERS, "class-scores")


def batch_images(inputs):
    """The images of one batch of a model's inputs: its `IMAGE` entry, or
    its first input.

    Example:

    >>> batch_images({"image": "the images", "label": "the labels"})
    'the images'
    """
    if isinstance(inputs, dict) and IMAGE in inputs:
        return inputs[IMAGE]
    return keras.tree.flatten(inputs)[0]


def image_input(model):
    """The image input tensor of `model`: its `IMAGE` input, or its first.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> image_input(model).shape  # the other input is the labels
    (None, 28, 28, 1)
    """
    _layer_names(model)
    if isinstance(model.input, dict) and IMAGE in model.input:
        return model.input[IMAGE]
    return keras.tree.flatten(model.input)[0]


def _first_layer(model, candidates, role):
    """The layer of `model` named first in `candidates`, else ValueError."""
    names = _layer_names(model)
    for name in candidates:
        if name in names:
            return model.get_layer(name)
    raise ValueError(
        f"The model has no layer for the {role} role: expected a layer "
        f"named one of {list(candidates)}. Received: a model named "
        f"{model.name!r} with layers {names}")


def _layer_names(model):
    """The names of the layers of `model`, checking it is a `keras.Model`."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for `model`, expected a `keras.Model`"
            f". Received: model={model!r} of type {type(model).__name__}")
    return [layer.name for layer in model.layers]
