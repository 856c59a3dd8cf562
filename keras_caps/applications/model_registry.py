"""`MODELS`: every model by the one name `train`, `compare`, the records
and the docs know it by.

A name is a `RegisteredModel`: a `ModelFamily` (builder and presets), the
kind of model it is, and one line for tables and help texts. There are
three kinds (`MODEL_KINDS`):

- `"paper"`: a paper's architecture with its own stem (Efficient-CapsNet,
  CapsNet, the vector-routing, inverted-attention and matrix-capsule
  networks).
- `"router"`: `CapsuleClassifier`, one stem, with one router of
  `keras_caps.applications.capsule_classifier.ROUTERS`, named after the
  router. Registering a router there registers its model here: adding a
  router is one file and one `ROUTERS` entry.
- `"control"`: the CNNs a comparison measures the routers against (the
  baseline on the same stem, the CNN ladder and Sabour et al.'s CNN).

`keras-caps compare` trains the routers and the controls; `keras-caps
train` trains any of them. Names used before 0.2.0 (`cnn_baseline`,
`capsule_classifier_<router>`, ...) are not accepted; `check_model_name`
names the new one, and `current_model_name` reads them in the run records
written before.
"""

import dataclasses
import functools

from keras_caps.applications.capsnet import CAPSNET
from keras_caps.applications.capsule_classifier import (
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier import CNN_BASELINE
from keras_caps.applications.capsule_classifier import POSITION_CNN
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.applications.capsule_classifier import SABOUR_BASELINE_CNN
from keras_caps.applications.capsule_classifier import VECTOR_CNN
from keras_caps.applications.capsule_classifier import VECTOR_CNN_DECODER
from keras_caps.applications.capsule_classifier import CapsuleClassifier
from keras_caps.applications.efficient_capsnet import EFFICIENT_CAPSNET
from keras_caps.applications.inverted_attention_capsnet import (
    INVERTED_ATTENTION_CAPSNET,
)
from keras_caps.applications.matrix_capsnet import MATRIX_CAPSNET
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.vector_routing_capsnet import (
    VECTOR_ROUTING_CAPSNET,
)

MODEL_KINDS = ("paper", "router", "control")


@dataclasses.dataclass(frozen=True)
class RegisteredModel:
    """One registered model: its family, its kind and a line about it.

    Attributes:
        family: `ModelFamily`. The builder and the per-dataset presets.
        kind: str. One of `MODEL_KINDS`: `"paper"`, `"router"` or
            `"control"`.
        description: str. One line for tables and help texts.
        compared_by_default: bool. Whether `keras-caps compare` trains it
            when no models are named (routers and controls only).
            Defaults to `True`.

    Example:

    >>> entry = keras_caps.applications.MODELS["dynamic"]
    >>> entry.kind, entry.family.name
    ('router', "CapsuleClassifier(router='dynamic')")
    """

    family: ModelFamily
    kind: str
    description: str
    compared_by_default: bool = True

    def __post_init__(self):
        if self.kind not in MODEL_KINDS:
            raise ValueError(
                f"Unknown `kind`. Expected one of {list(MODEL_KINDS)}. "
                f"Received: kind={self.kind!r}")

    @property
    def compared(self):
        """Whether `keras-caps compare` can train it (routers, controls)."""
        return self.kind != "paper"


def _router_model(router):
    """The `CapsuleClassifier` of `router`, registered under its name."""
    family = ModelFamily(
        name=f"CapsuleClassifier(router={router!r})",
        builder=functools.partial(CapsuleClassifier, router=router),
        presets=CAPSULE_CLASSIFIER_PRESETS)
    return RegisteredModel(family, "router", ROUTERS[router].description)


MODELS = {
    "efficient_capsnet": RegisteredModel(
        EFFICIENT_CAPSNET, "paper",
        "Efficient-CapsNet (Mazzia et al. 2021): self-attention routing, "
        "the official architecture and recipe"),
    "capsnet": RegisteredModel(
        CAPSNET, "paper",
        "CapsNet (Sabour et al. 2017): dynamic routing, 3 iterations"),
    "vector_routing_capsnet": RegisteredModel(
        VECTOR_ROUTING_CAPSNET, "paper",
        "stacked vector routings (Heinsen 2022) on a small stem"),
    "inverted_attention_capsnet": RegisteredModel(
        INVERTED_ATTENTION_CAPSNET, "paper",
        "inverted dot-product attention routing on a ResNet backbone "
        "(Tsai et al. 2020), CIFAR"),
    "matrix_capsnet": RegisteredModel(
        MATRIX_CAPSNET, "paper",
        "matrix capsules with EM routing (Hinton, Sabour & Frosst 2018), "
        "smallNORB"),
    **{router: _router_model(router) for router in ROUTERS},
    "cnn": RegisteredModel(
        CNN_BASELINE, "control",
        "a plain CNN on the routers' stem, about as many parameters"),
    "cnn_positions": RegisteredModel(
        POSITION_CNN, "control",
        "the CNN ladder's step 1: the map read position by position, "
        "softmax and cross-entropy"),
    "cnn_vectors": RegisteredModel(
        VECTOR_CNN, "control",
        "the CNN ladder's step 2: squashed class vectors and the margin "
        "loss, no decoder"),
    "cnn_vectors_decoder": RegisteredModel(
        VECTOR_CNN_DECODER, "control",
        "the CNN ladder's step 3: step 2 with the capsule models' decoder "
        "and reconstruction loss"),
    "sabour_cnn": RegisteredModel(
        SABOUR_BASELINE_CNN, "control",
        "Sabour et al.'s baseline CNN (35.4 M parameters, their affNIST "
        "protocol)", compared_by_default=False),
}

# The names before 0.2.0, when `train` and `compare` named models apart.
_RENAMED = {"cnn_baseline": "cnn", "sabour_baseline_cnn": "sabour_cnn"}
_OLD_ROUTER_PREFIX = "capsule_classifier_"


def current_model_name(name, reconstruction=None):
    """The registered name of a model named `name` in a record written
    before 0.2.0 (a `run.json`); other names are returned unchanged.

    Before 0.2.0 `keras-caps train` called the router models
    `capsule_classifier_<router>`, the baseline `cnn_baseline`, Sabour et
    al.'s CNN `sabour_baseline_cnn`, and the CNN ladder's steps 2 and 3
    both `cnn_vectors` (step 3 with `reconstruction=True`).

    Example:

    >>> current_model_name("capsule_classifier_dynamic")
    'dynamic'
    >>> current_model_name("cnn_vectors", reconstruction=True)
    'cnn_vectors_decoder'
    """
    if name == "cnn_vectors" and reconstruction:
        return "cnn_vectors_decoder"
    if name.startswith(_OLD_ROUTER_PREFIX):
        router = name[len(_OLD_ROUTER_PREFIX):]
        if router in ROUTERS:
            return router
    return _RENAMED.get(name, name)


def renamed_model(name):
    """The registered name that replaced `name`, a name used before 0.2.0,
    else `None` (for a registered name, an unknown one or a non-string).

    Example:

    >>> renamed_model("cnn_baseline"), renamed_model("resnet")
    ('cnn', None)
    """
    if not isinstance(name, str) or name in MODELS:
        return None
    renamed = current_model_name(name)
    return renamed if renamed in MODELS else None


def check_model_name(name, argument_name="model"):
    """`name` if it is a key of `MODELS`, else a `ValueError` listing the
    names (and the new name of one used before 0.2.0).

    Example:

    >>> check_model_name("cnn_baseline")
    Traceback (most recent call last):
    ...
    ValueError: Unknown `model`: 'cnn_baseline' is named 'cnn' since 0.2.0...
    """
    if isinstance(name, str) and name in MODELS:
        return name
    renamed = renamed_model(name)
    if renamed is not None:
        raise ValueError(
            f"Unknown `{argument_name}`: {name!r} is named {renamed!r} since "
            f"0.2.0 (one name in every command). Received: "
            f"{argument_name}={name!r}")
    raise ValueError(
        f"Unknown `{argument_name}`. Expected one of {list(MODELS)}. "
        f"Received: {argument_name}={name!r}")
