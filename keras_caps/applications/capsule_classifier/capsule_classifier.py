import math

import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.builder_arguments import resolve_num_classes
from keras_caps.applications.capsule_classifier import efficient_capsnet_stem
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier.routers import ROUTERS
from keras_caps.applications.capsule_head import capsule_head_model
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    STEM_NORMALIZATIONS,
)
from keras_caps.applications.image_inputs import check_image_shape
from keras_caps.applications.model_family import ModelFamily
from keras_caps.validation import check_choice


@keras_caps_export("keras_caps.applications.CapsuleClassifier")
@builder_docstring
def CapsuleClassifier(dataset="mnist", *, router="self_attention",
                      router_options=None, head=None, input_shape=None,
                      num_classes=None, reconstruction=True,
                      input_statistics=None, compile=True, optimizer="auto",
                      jit_compile="auto", name=None,
                      stem_normalization="batch"):
    """One stem, any router: Efficient-CapsNet with a swappable router.

    Efficient-CapsNet's convolutional stem and primary capsules for
    `dataset` (Mazzia et al., 2021), then `router` as the class-capsule
    layer, then the capsule head every capsule network here shares: the
    capsule lengths as class scores, the margin loss and, with
    `reconstruction=True`, Efficient-CapsNet's decoder. Only the router
    changes between models, so they can be compared under one recipe
    (`keras-caps compare`):

    ```
    x        = stem(image / 255)                   # Efficient-CapsNet's
    primary  = PrimaryCaps(x)                      # (batch, 16, 8)
    classes  = router(primary)                     # (batch, classes, 16)
    score    = Dense(1)(classes)           # inverted attention, vector:
    classes  = sigmoid(score) * classes / |classes|  # a logit per class
    classes  = squash(classes)             # other unsquashed outputs
    scores   = Length(classes)                     # (batch, classes)
    ```

    Routers (`keras_caps.applications.capsule_classifier.ROUTERS`):

    - `"self_attention"`: `FCCaps`; the model is Efficient-CapsNet.
    - `"dynamic"`: `DynamicRouting`, 3 iterations (Sabour et al., 2017).
    - `"uniform"`: no routing, the control that isolates it: the votes
      `u_i W_ij` of `"dynamic"` summed with uniform couplings
      `c_ij = 1 / classes` and squashed, `DynamicRouting` with one
      iteration (Sabour et al., 2017, Procedure 1 without the agreement
      update); 161,664 parameters, as `"dynamic"`.
    - `"inverted_attention"`: `InvertedAttentionRouting` with vector poses,
      2 passes (Tsai et al., 2020). Its class poses are LayerNormed (one
      gain and bias for all classes), so their norms are all about
      `sqrt(16)`; as Tsai et al. read each class pose as a logit with one
      linear classifier shared by the classes, the head scores each pose
      with a `Dense(1)` (layer `"class_score"`) and scales its direction
      to the sigmoid of the score, the class capsule's length.
      `head="layer_norm"` builds the head of models saved before (the
      poses scaled by `1 / sqrt(16)` and squashed: every class length is
      the same at initialisation, and the margin loss sends the router
      almost no gradient).
    - `"vector"`: `VectorRouting`, 2 iterations (Heinsen, 2022), without
      its output normalisation (which would give every class capsule the
      same length). Heinsen reads 1-D outputs as logits; the head reads a
      logit from each 16-D output with the same shared `Dense(1)` and
      scales its direction to the logit's sigmoid, as for inverted
      attention. `head="unsquashed"` builds the head of models saved
      before (the outputs squashed).
    - `"hybrid"`: `HybridRouting`, dynamic routing with a bilinear
      attention term weighted by a learned scalar (starting at 0, plain
      routing), 3 iterations.
    - `"attention"`: `AttentionRouting`, query-key-value attention routing
      in one pass with one head.
    - `"em"`: `EMRouting`, 3 EM iterations (Hinton et al., 2018) on the
      stem's primary capsules taken as activation capsules: each squashed
      8-D capsule's length is its activation and the capsule itself its
      pose, voting `u_i W_ij` (16-D) for every class; the data rescaled by
      classes / primary capsules (Gritzman, 2019) and inverse temperatures
      ramping to 0.01. Each class capsule is its mean vote's direction
      scaled to its EM activation, so its length is the class activation.
    - `"self_routing"`: `SelfRouting` (Hahn et al., 2019) on the same
      activation capsules: per-capsule routing weights, no agreement, one
      pass; each class capsule is its pose scaled to its activation (all
      activations start at `1 / classes`, the routing weights being 0).

    Trainable parameters on MNIST without the decoder: 161,824
    (self_attention), 161,664 (dynamic), 161,713 (inverted_attention;
    161,696 with `head="layer_norm"`), 142,641 (vector; 142,624 with
    `head="unsquashed"`), 161,793 (hybrid), 161,952 (attention),
    161,684 (em), 163,104 (self_routing); the stem and primary capsules
    hold 141,184 of them. On `"multi_mnist"` the primary capsules' window
    is 5 x 5 (5 * 5 * 128 + 128 = 3,328 parameters instead of 10,496), so
    each count is 7,168 lower (154,656 for self_attention); the model
    reads the two digits from its two longest class capsules (Sabour et
    al., 2017, Section 6) and its decoder reconstructs each digit from the
    capsule of its own class (the two longest at inference).

    Args:
        dataset: str. `"mnist"`, `"fashion_mnist"`, `"smallnorb"`,
            `"mnist_canvas"` (digits on a 40 x 40 canvas) or
            `"multi_mnist"` (two overlapping digits on 36 x 36).
        router: str. A key of `ROUTERS`. Defaults to `"self_attention"`.
        router_options: dict or `None`. Arguments of the router layer, over
            the defaults above (e.g. `{"num_iterations": 2}`).
        head: str or `None`. How the head reads the router's outputs as
            class capsules: `None` for the router's own reading (the
            `outputs` of its `ROUTERS` entry), or one of the other
            readings it lists (`other_outputs`): `"layer_norm"` for
            `"inverted_attention"` and `"unsquashed"` for `"vector"`, the
            heads of models saved by earlier versions. Defaults to `None`.
        input_shape: tuple `(height, width, channels)`. Defaults to the
            preset's; for other shapes the primary capsules cover the whole
            last feature map.
        num_classes: int. Defaults to the preset's.
        reconstruction: bool. Add the decoder and its loss. Defaults to
            `True`.
        input_statistics: `(mean, variance)` per channel in raw pixel units,
            for presets that standardise their input (smallNORB).
        compile: bool. Compile with Adam, the margin loss and metrics.
            Defaults to `True`.
        optimizer: `"auto"` (Adam with the preset's learning rate) or a
            Keras optimizer.
        jit_compile: {jit_compile}
        name: str. Model name. Defaults to `"capsule_classifier_<router>"`.
        stem_normalization: str. `"batch"` (default, Efficient-CapsNet's
            BatchNormalization) or `"group"`: GroupNormalization with 8
            channels per group in its place (Wu & He, 2018), which keeps
            no training-time statistics, so a corruption cannot shift
            the stem away from frozen moving averages; the same trainable
            parameters (161,824 for self_attention on MNIST, without the
            576 BatchNorm statistics).

    Returns:
        A `keras.Model`, mapping images to class scores (or, with
        `reconstruction=True`, `{"image", "label"}` to `{"length",
        "reconstruction"}`, as `EfficientCapsNet`).

    Example:

    >>> model = keras_caps.applications.CapsuleClassifier(
    ...     "mnist", router="dynamic", reconstruction=False)
    >>> model.output_shape
    (None, 10)

    Reference:
    - [Mazzia et al., 2021](https://arxiv.org/abs/2101.12491)
    - [Sabour et al., 2017](https://arxiv.org/abs/1710.09829)
    - [Tsai et al., 2020](https://arxiv.org/abs/2002.04764)
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754)
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    - [Hahn, Pyeon & Kim, 2019](https://arxiv.org/abs/1905.10003)
    - [Wu & He, 2018](https://arxiv.org/abs/1803.08494)
    """
    check_choice("router", router, ROUTERS)
    check_choice("stem_normalization", stem_normalization,
                 STEM_NORMALIZATIONS)
    spec = ROUTERS[router]
    router_options = {} if router_options is None else router_options
    spec.check_options(router, router_options)
    head = _check_head(router, spec, head)
    preset = CAPSULE_CLASSIFIER.get_preset(dataset)
    input_shape = check_image_shape(input_shape, preset["input_shape"])
    num_classes = resolve_num_classes(num_classes, preset, minimum=2)

    # === Layers and functional model ===
    images = keras.Input(input_shape, name=roles.IMAGE)
    x = efficient_capsnet_stem.efficient_capsnet_stem(
        images, dataset, preset, input_shape, input_statistics,
        normalization=stem_normalization)
    capsules = efficient_capsnet_stem.primary_capsules(
        x, preset, input_shape)  # (batch, num_primary, primary_dim)
    capsule_dim = preset["capsule_dim"]
    layer = spec.factory(
        num_classes, capsule_dim, capsules.shape[1], router_options,
        roles.CLASS_CAPSULES if head == "squashed" else roles.ROUTING)
    class_capsules = _read_class_capsules(
        head, layer(capsules))  # (batch, num_classes, capsule_dim)
    decoder = None
    if reconstruction:
        decoder = efficient_capsnet_stem.decoder(
            preset, input_shape, num_classes * capsule_dim)
    return capsule_head_model(
        images, class_capsules, decoder, preset,
        name or f"capsule_classifier_{router}", compile=compile,
        optimizer=optimizer, jit_compile=jit_compile)


def _check_head(router, spec, head):
    """The `OUTPUT_KINDS` entry the head reads the router's outputs as."""
    if head is None:
        return spec.outputs
    if head not in spec.heads:
        raise ValueError(
            f"Received an invalid value for `head`, expected None or one of "
            f"{list(spec.heads)} for router {router!r}. Received: "
            f"head={head!r}")
    return head


def _read_class_capsules(head, outputs):
    """Class capsules, lengths in [0, 1), from router `outputs`.

    `outputs`: `(batch, classes, dim)`; `head`: an `OUTPUT_KINDS` entry.
    """
    if head == "squashed":
        return outputs
    if head == "pose_score":
        # A linear classifier shared by the classes scores each pose, as
        # Tsai et al. (2020) read their class capsules (their logits); the
        # capsule is the pose's direction scaled to sigmoid(score).
        scores = keras.layers.Dense(1, name="class_score")(
            outputs)  # (batch, classes, 1)
        scores = keras.layers.Activation(
            "sigmoid", name="class_activation")(scores)
        directions = keras.layers.UnitNormalization(
            axis=-1, name="class_direction")(outputs)  # norms 1
        return keras.layers.Multiply(name=roles.CLASS_CAPSULES)(
            [directions, scores])  # (batch, classes, dim), norms in (0, 1)
    if head == "layer_norm":  # norms ~sqrt(d) -> ~1
        dim = outputs.shape[-1]
        outputs = keras.layers.Rescaling(
            1.0 / math.sqrt(dim), name="routing_scale")(outputs)
    return layers.Squash(name=roles.CLASS_CAPSULES)(outputs)


# The family's presets; every router shares them.
CAPSULE_CLASSIFIER = ModelFamily(name="CapsuleClassifier",
                                 builder=CapsuleClassifier,
                                 presets=CAPSULE_CLASSIFIER_PRESETS)
