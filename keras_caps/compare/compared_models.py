"""The models a comparison can train: the routers and the controls of
`keras_caps.applications.MODELS` (its `"router"` and `"control"` kinds;
the papers' models have stems of their own, so they are trained with
`keras-caps train`).
"""

from keras_caps.applications import MODELS
from keras_caps.applications import renamed_model

CONTROL_LADDER = ("cnn", "cnn_positions", "cnn_vectors",
                  "cnn_vectors_decoder", "uniform", "dynamic")
"""The ladder from a plain CNN to routed capsules, each step changing one
thing on the same stem (docs/compare.md, Controls): position-wise
reading, squashed class vectors with the margin loss, the decoder,
capsule votes without routing (`uniform`), then routing (`dynamic`, the
same parameters as `uniform`)."""


def ladder_steps(models):
    """The adjacent `(lower, upper)` steps of `CONTROL_LADDER` among
    `models` (a step a comparison lacks is skipped over).

    Example:

    >>> ladder_steps(["dynamic", "cnn", "uniform", "self_attention"])
    [('cnn', 'uniform'), ('uniform', 'dynamic')]
    """
    present = [name for name in CONTROL_LADDER if name in models]
    return list(zip(present, present[1:]))


def comparable_models():
    """The names `compare` can train, in the registry's order.

    Example:

    >>> comparable_models()[:3]
    ['self_attention', 'dynamic', 'uniform']
    """
    return [name for name, entry in MODELS.items() if entry.compared]


def default_models(reconstruction=True):
    """The models `compare` trains when none are named.

    Those registered `compared_by_default` (all but Sabour et al.'s CNN,
    35.4 M parameters), and without `reconstruction` not the ones whose
    decoder is part of what they are (the CNN ladder's step 3).

    Example:

    >>> "sabour_cnn" in default_models()
    False
    >>> "cnn_vectors_decoder" in default_models(reconstruction=False)
    False
    """
    return [name for name in comparable_models()
            if MODELS[name].compared_by_default
            and (reconstruction or not MODELS[name].family.requires_decoder)]


def model_reconstruction(name, reconstruction):
    """Whether the compared model `name` trains with a decoder, given the
    comparison's `reconstruction`: the CNNs have none, the ladder's step 3
    always has one, the routers follow the comparison."""
    fixed = MODELS[name].family.fixed_reconstruction
    return reconstruction if fixed is None else fixed


def check_routers(routers):
    """The compared models `routers` as a list (`None`: every one),
    refusing an empty, unknown or repeated name."""
    names = comparable_models()
    routers = names if routers is None else list(routers)
    if not routers:
        raise ValueError("Expected at least one router. Received: "
                         "routers=[]")
    unknown = [name for name in routers
               if not isinstance(name, str) or name not in MODELS]
    if unknown:
        renamed = [f"{name!r} is named {renamed_model(name)!r}"
                   for name in unknown if renamed_model(name) is not None]
        since = f" ({'; '.join(renamed)} since 0.2.0)" if renamed else ""
        raise ValueError(
            f"Unknown routers {unknown}{since}. Expected some of {names}. "
            f"Received: routers={routers!r}")
    for name in routers:
        if not MODELS[name].compared:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} is a "
                "paper's model with a stem of its own; a comparison trains "
                "one stem with each router, and the controls. Train it "
                f"with `keras-caps train --model {name}`. Expected some of "
                f"{names}. Received: routers={routers!r}")
    duplicates = sorted({name for name in routers if routers.count(name) > 1})
    if duplicates:
        raise ValueError(f"Duplicate routers {duplicates}. Received: "
                         f"routers={routers!r}")
    return routers


def check_controls(routers, dataset, reconstruction):
    """Refuses a control that does not exist for the comparison: a model
    without a preset for `dataset`, or the ladder's decoder step in a
    comparison without reconstruction."""
    for name in routers:
        family = MODELS[name].family
        if dataset not in family.presets:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} has no "
                f"preset for {dataset!r}; it exists for "
                f"{sorted(family.presets)}. Drop it. Received: "
                f"routers={routers!r}, dataset={dataset!r}")
        if family.requires_decoder and not reconstruction:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} is the "
                "CNN ladder's step that adds the decoder and its "
                "reconstruction loss, and a comparison without "
                "reconstruction (--no-reconstruction) trains no decoder. "
                "Drop it ('cnn_vectors' is the same model without). "
                f"Received: routers={routers!r}, reconstruction=False")
