"""The models a comparison trains: `COMPARED_MODELS` maps each
comparison name (a router of `CapsuleClassifier`, `"cnn"` and the
controls of docs/compare.md) to its `keras-caps train --model` name.
"""



from keras_caps import training
from keras_caps.applications.capsule_classifier import ROUTERS

# Comparison names -> `keras-caps train --model` names.
COMPARED_MODELS = {
    **{router: f"capsule_classifier_{router}" for router in ROUTERS},
    "cnn": "cnn_baseline",
    # The controls (docs/compare.md): the CNN ladder's steps 1 to 3 and
    # Sabour et al.'s baseline CNN.
    "cnn_positions": "cnn_positions",
    "cnn_vectors": "cnn_vectors",
    "cnn_vectors_decoder": "cnn_vectors",
    "sabour_cnn": "sabour_baseline_cnn",
}


# Models whose decoder is part of what they are: the CNNs have none, the
# CNN ladder's step 3 (`cnn_vectors_decoder`) is the step that adds it.
# Every other model has its decoder when the comparison's
# `reconstruction` says so.
FIXED_DECODERS = {"cnn": False, "cnn_positions": False,
                  "cnn_vectors": False, "cnn_vectors_decoder": True,
                  "sabour_cnn": False}


# Left out of the default models: Sabour et al.'s CNN (35.4 M parameters,
# for their affNIST protocol; name it to train it).
NOT_BY_DEFAULT = ("sabour_cnn",)


def default_models(reconstruction=True):
    """The models `compare` trains when none are named.

    Every key of `COMPARED_MODELS` but `NOT_BY_DEFAULT`, and without
    `reconstruction` but the CNN ladder's step with the decoder.

    Example:

    >>> "sabour_cnn" in default_models()
    False
    >>> "cnn_vectors_decoder" in default_models(reconstruction=False)
    False
    """
    return [name for name in COMPARED_MODELS
            if name not in NOT_BY_DEFAULT
            and (reconstruction or not FIXED_DECODERS.get(name, False))]


def model_reconstruction(name, reconstruction):
    """Whether the compared model `name` trains with a decoder, given the
    comparison's `reconstruction`."""
    return FIXED_DECODERS.get(name, reconstruction)


def check_controls(routers, dataset, reconstruction):
    """Refuses a control that does not exist for the comparison: a model
    without a preset for `dataset`, or the ladder's decoder step in a
    comparison without reconstruction."""
    for name in routers:
        presets = training.MODELS[COMPARED_MODELS[name]].presets
        if dataset not in presets:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} has no "
                f"preset for {dataset!r}; it exists for {sorted(presets)}. "
                f"Drop it. Received: routers={routers!r}, "
                f"dataset={dataset!r}")
        if FIXED_DECODERS.get(name) and not reconstruction:
            raise ValueError(
                f"Received an invalid value for `routers`: {name!r} is the "
                "CNN ladder's step that adds the decoder and its "
                "reconstruction loss, and a comparison without "
                "reconstruction (--no-reconstruction) trains no decoder. "
                "Drop it ('cnn_vectors' is the same model without). "
                f"Received: routers={routers!r}, reconstruction=False")
