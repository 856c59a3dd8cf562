"""The adversarial attacks of a robustness evaluation.

`keras_caps.evaluation.evaluate_robustness(..., attacks=...)`, the attack
flags of `keras-caps evaluate` and `keras-caps compare` (`--fgsm`,
`--pgd`, `--pgd-steps`, `--pgd-restarts`, `--attack-loss`,
`--vote-attack`, `--masking-epsilon`) run the attacks of
`keras_caps.evaluation.attacks.adversarial_images` (L-inf) on the test
images and classify the results. Settings (`check_attacks`):

- `"fgsm"`: epsilons of FGSM (Goodfellow et al., ICLR 2015), fractions
  of the pixel range in [0, 1];
- `"pgd"`: epsilons of PGD (Madry et al., ICLR 2018) with `"pgd_steps"`
  steps of 2.5 epsilon / steps from a random start, the best of
  `"pgd_restarts"` starts;
- `"loss"`: the attack loss, `"score_margin"` (default: Carlini &
  Wagner's class-score margin, max_{j != t} s_j - s_t, which has a
  gradient wherever the scores do), `"margin"` (the
  capsule margin loss, flat, without gradient, on images the model is
  confident about) or `"cross_entropy"`;
- `"vote"`: also the vote attack (Gu, Wu & Tresp, ICLR 2021, section 3)
  at the PGD epsilons: PGD on the votes averaged over the child capsules,
  bypassing routing. A model the vote attack does not apply to
  (`has_votes`: the CNNs, EM, self-, vector and inverted attention
  routing) gets its output attack instead (the same PGD, recorded with
  `"vote_target": "output"`);
- `"large_epsilon"`: the large epsilon of the gradient-masking check
  `"near_zero"` (`keras_caps.evaluation.attack_checks`), run as one more
  PGD epsilon (default 0.5: every image can then be made uniformly
  grey); `None`: no run of its own, the check takes the largest PGD
  epsilon.
- `"attack_images"`: `None` (the default, and what a record without the
  key means) attacks every test image; an integer N >= 1 attacks only the
  first N test images, in the loader's fixed test order: a fixed subset,
  as attack evaluations use when the budget demands it (e.g. 1,000
  images; see Carlini et al. 2019, "On evaluating adversarial
  robustness").
  Every attack column (white-box, vote, transfer, BatchNorm-adapted) is
  then on those N images, and the masking checks compare them with the
  clean accuracy of the same N images (the record's
  `"attacks": {"clean_accuracy_subset": ...}`). More images than the test
  set holds is an error (`check_attack_images`), not clamped: a
  comparison should not silently attack fewer images than it says. Kept
  in the settings only when given, so records made before it existed
  stay equal to those made without it.

Results are keyed as the corruptions' (`robustness.column_key`):
`"fgsm:0.1"`, `"pgd:0.1"`, `"vote_pgd:0.1"`, and in a comparison
`"transfer_pgd:0.1"` (PGD made on the CNN baseline of the same seed,
`keras_caps.compare.comparison`); in the evaluation record as
`record["fgsm"]["0.1"]`, ....
"""

import os

import numpy as np

from keras_caps.evaluation import attack_checks

ATTACK_LOSSES = ("margin", "cross_entropy", "score_margin")
ATTACK_DEFAULTS = {"fgsm": [], "pgd": [], "pgd_steps": 10,
                   "pgd_restarts": 1, "loss": "score_margin", "vote": False,
                   "large_epsilon": attack_checks.LARGE_EPSILON}
# Settings kept only when given (see the module docstring).
ATTACK_OPTIONS = ("attack_images",)
# Seed offsets (after the corruptions' 1 to 4), so each attack draws its
# own random starts; the vote attack and the transfer share PGD's.
_SEED_OFFSETS = {"fgsm": 5, "pgd": 6, "vote_pgd": 6, "transfer_pgd": 6}
_TITLES = {"fgsm": "FGSM ε", "pgd": "PGD ε", "vote_pgd": "vote PGD ε",
           "transfer_pgd": "transfer PGD ε"}


def check_attacks(attacks):
    """The attack settings, validated and completed with the defaults.

    Args:
        attacks: dict or `None`. Any of the keys of `ATTACK_DEFAULTS`
            (see the module docstring).

    Returns:
        dict with every key of `ATTACK_DEFAULTS`, epsilons sorted; `None`
        when no attack is requested (no FGSM and no PGD epsilon).

    Example:

    >>> check_attacks({"pgd": [0.1], "vote": True})["pgd_steps"]
    10
    >>> check_attacks({"fgsm": [-0.1]})
    Traceback (most recent call last):
    ...
    ValueError: Received an invalid value for `fgsm`, expected epsilons in [0, 1] (fractions of the pixel range 0-255). Received: fgsm=[-0.1]
    """  # noqa: E501
    if attacks is None:
        return None
    if not isinstance(attacks, dict):
        raise TypeError(
            "Received an invalid type for `attacks`, expected a dict (e.g. "
            f"{{'fgsm': [0.1], 'pgd': [0.1]}}). Received: attacks="
            f"{attacks!r}")
    unknown = sorted(set(attacks) - set(ATTACK_DEFAULTS)
                     - set(ATTACK_OPTIONS))
    if unknown:
        raise ValueError(
            f"Received an invalid value for `attacks`: unknown keys "
            f"{unknown}, expected some of {list(ATTACK_DEFAULTS)}. "
            f"Received: attacks={attacks!r}")
    result = {**ATTACK_DEFAULTS, **attacks}
    for kind in ("fgsm", "pgd"):
        result[kind] = _epsilons(kind, result[kind])
    for name in ("pgd_steps", "pgd_restarts"):
        value = result[name]
        if isinstance(value, bool) or not isinstance(
                value, (int, np.integer)) or value < 1:
            raise ValueError(
                f"Received an invalid value for `{name}`, expected an "
                f"integer >= 1. Received: {name}={value!r}")
        result[name] = int(value)
    if result["loss"] not in ATTACK_LOSSES:
        raise ValueError(
            f"Received an invalid value for `loss`, expected one of "
            f"{list(ATTACK_LOSSES)}. Received: loss={result['loss']!r}")
    if not isinstance(result["vote"], bool):
        raise TypeError(
            "Received an invalid type for `vote`, expected a bool. "
            f"Received: vote={result['vote']!r}")
    if result["vote"] and not result["pgd"]:
        raise ValueError(
            "Received an invalid value for `vote`: the vote attack runs at "
            "the PGD epsilons, and none is given (--pgd). Received: "
            f"vote=True, pgd={result['pgd']!r}")
    large = result["large_epsilon"]
    if large is not None and (not attack_checks.is_fraction(large)
                              or large == 0):
        raise ValueError(
            "Received an invalid value for `large_epsilon`, expected a "
            "number in (0, 1] or None. Received: "
            f"large_epsilon={large!r}")
    if large is not None:
        result["large_epsilon"] = float(large)
    _check_subset_size(result)
    if not result["fgsm"] and not result["pgd"]:
        return None
    return result


def _check_subset_size(result):
    """Checks `"attack_images"` in place; drops it when `None`."""
    count = result.pop("attack_images", None)
    if count is None:
        return
    if isinstance(count, bool) or not isinstance(
            count, (int, np.integer)) or count < 1:
        raise ValueError(
            "Received an invalid value for `attack_images`, expected an "
            "integer >= 1 (attack the first N test images) or None (all "
            f"of them). Received: attack_images={count!r}")
    result["attack_images"] = int(count)


def check_attack_images(attacks, num_images):
    """Refuses an `"attack_images"` larger than the test set.

    Args:
        attacks: dict or `None`. `check_attacks`' settings.
        num_images: int. The test images there are.

    Example:

    >>> check_attack_images({"attack_images": 20}, 10)
    Traceback (most recent call last):
    ...
    ValueError: Received an invalid value for `attack_images`, expected at most the 10 images of the test set (or None: all of them). Received: attack_images=20
    """  # noqa: E501
    count = (attacks or {}).get("attack_images")
    if count is not None and count > num_images:
        raise ValueError(
            "Received an invalid value for `attack_images`, expected at "
            f"most the {num_images} images of the test set (or None: all "
            f"of them). Received: attack_images={count}")


def attack_subset(attacks, images, labels):
    """The test images and labels the attacks run on: the first
    `attacks["attack_images"]` (`check_attack_images`), or all of them.

    Example:

    >>> images, labels = attack_subset({"attack_images": 2},
    ...                                np.zeros((5, 28, 28, 1)), np.arange(5))
    >>> images.shape, labels.tolist()
    ((2, 28, 28, 1), [0, 1])
    """
    check_attack_images(attacks, len(images))
    count = (attacks or {}).get("attack_images")
    if count is None:
        return images, labels
    return images[:count], labels[:count]


def _epsilons(kind, values):
    if not isinstance(values, (list, tuple)):
        raise TypeError(
            f"Received an invalid type for `{kind}`, expected a list of "
            f"epsilons (e.g. [0.1, 0.2]). Received: {kind}={values!r}")
    if not all(attack_checks.is_fraction(value) for value in values):
        raise ValueError(
            f"Received an invalid value for `{kind}`, expected epsilons in "
            "[0, 1] (fractions of the pixel range 0-255). Received: "
            f"{kind}={list(values)!r}")
    checked = sorted(float(value) for value in values)
    if len(set(checked)) != len(checked):
        raise ValueError(
            f"Received an invalid value for `{kind}`: duplicate epsilons. "
            f"Received: {kind}={list(values)!r}")
    return checked


def pgd_epsilons(attacks):
    """The PGD epsilons evaluated: those asked for and the large one."""
    epsilons = set(attacks["pgd"])
    if attacks["large_epsilon"] is not None:
        epsilons.add(attacks["large_epsilon"])
    return sorted(epsilons)


def attack_columns(attacks, transfer=False):
    """`(key, title)` of each attack column, as `comparison.columns`.

    Example:

    >>> attack_columns(check_attacks({"fgsm": [0.1], "pgd": [0.1],
    ...                               "vote": True}))
    ... # doctest: +NORMALIZE_WHITESPACE
    [('fgsm:0.1', 'FGSM ε 0.1'), ('pgd:0.1', 'PGD ε 0.1'),
     ('pgd:0.5', 'PGD ε 0.5'), ('vote_pgd:0.1', 'vote PGD ε 0.1')]
    """
    if not attacks:
        return []
    kinds = [("fgsm", attacks["fgsm"]), ("pgd", pgd_epsilons(attacks))]
    if attacks["vote"]:
        kinds.append(("vote_pgd", attacks["pgd"]))
    if transfer:
        kinds.append(("transfer_pgd", attacks["pgd"]))
    return [(f"{kind}:{epsilon}", f"{_TITLES[kind]} {epsilon}")
            for kind, epsilons in kinds for epsilon in epsilons]


def has_votes(predictor):
    """Whether the vote attack applies to `predictor`: its class capsules
    are squashed sums of one vote per child capsule and class
    (`DynamicRouting` and its uniform and hybrid forms, `FCCaps`,
    `AttentionRouting` with vote values). Not the CNNs (no router), nor
    EM and self-routing (their lengths are activations), vector or
    inverted attention routing (no such votes): `keras_caps.evaluation.
    attacks` refuses those, and this asks it, with the gradient of one
    blank image.

    Example:

    >>> from keras_caps.applications import CNNBaseline
    >>> has_votes(CNNBaseline("mnist"))
    False
    """
    from keras_caps.evaluation import attacks as attacks_lib

    probe = np.zeros((1, *predictor.inputs[0].shape[1:]), "float32")
    try:
        attacks_lib.attack_gradients(predictor, probe, np.zeros(1, "int64"),
                                     target="votes")
    except ValueError as error:
        if "`target`" not in str(error):
            raise
        return False
    return True


def attack_seed(attacks, kind, epsilon, seed):
    """The random-start seed of one attack column: PGD, the vote attack
    and the transfer at one epsilon share it (a model without votes then
    gets its PGD images again)."""
    position = (attacks["fgsm"] if kind == "fgsm"
                else pgd_epsilons(attacks)).index(epsilon)
    return int(seed) + 1000 * _SEED_OFFSETS[kind] + position


def adversarial_set(predictor, images, labels, attacks, kind, epsilon,
                    seed, batch_size=256):
    """The adversarial images of one attack column.

    Args:
        predictor: The classifier (`robustness.classifier(model)`).
        images, labels: The clean test images (0-255) and classes.
        attacks: dict. `check_attacks`' settings.
        kind: `"fgsm"`, `"pgd"`, `"vote_pgd"` (for a model with votes,
            `has_votes`) or `"transfer_pgd"` (PGD on `predictor`, the
            source model of the transfer).
        epsilon: float. The budget, a fraction of 255 (L-inf).
        seed: int. The evaluation's seed.
        batch_size: int. Images attacked at once.

    Returns:
        float32 array, the shape of `images`.

    Example:

    ```python
    adversarial = adversarial_set(classifier(model), images, labels,
                                  check_attacks({"pgd": [0.1]}), "pgd",
                                  0.1, seed=1234)
    ```
    """
    from keras_caps.evaluation import attacks as attacks_lib

    method = "fgsm" if kind == "fgsm" else "pgd"
    target = "votes" if kind == "vote_pgd" else "output"
    return attacks_lib.adversarial_images(
        predictor, images, labels, epsilon=epsilon, method=method,
        norm="linf", steps=attacks["pgd_steps"],
        restarts=attacks["pgd_restarts"], loss=attacks["loss"],
        seed=attack_seed(attacks, kind, epsilon, seed),
        batch_size=batch_size, target=target)


def attacked_sets(predictor, images, labels, attacks, seed,
                  batch_size=256):
    """Yields `(kind, epsilon, adversarial images)` for each column of
    `attack_columns(attacks)` (no transfer), in that order; the images
    are `None` for the vote attack of a model without votes (the same
    as its PGD's, whose predictions are to be reused)."""
    if not attacks:
        return
    votes = attacks["vote"] and has_votes(predictor)
    epsilons = {"fgsm": attacks["fgsm"], "pgd": pgd_epsilons(attacks),
                "vote_pgd": attacks["pgd"] if attacks["vote"] else []}
    for kind, values in epsilons.items():
        for epsilon in values:
            if kind == "vote_pgd" and not votes:
                yield kind, epsilon, None
                continue
            yield kind, epsilon, adversarial_set(
                predictor, images, labels, attacks, kind, epsilon, seed,
                batch_size)


def attack_record(predictor, attacks, record, clean_subset=None):
    """The `"attacks"` and `"masking_checks"` entries of an evaluation
    record holding the attack accuracies (`record["fgsm"]`, ...);
    `clean_subset`: with `"attack_images"`, the clean accuracy of the
    attacked images, recorded as `"clean_accuracy_subset"` and used as
    the masking checks' epsilon 0."""
    target = None  # No vote attack asked for.
    if attacks["vote"]:
        target = "votes" if has_votes(predictor) else "output"
    entry = {**attacks, "vote_target": target}
    if attacks.get("attack_images") is not None:
        entry["clean_accuracy_subset"] = clean_subset
    return {"attacks": entry,
            "masking_checks": attack_checks.masking_checks(
                {**record, "attacks": entry},
                large_epsilon=attacks["large_epsilon"])}


def check_attack_model(model_path, argument_name="model_path"):
    """Refuses a model the attacks cannot differentiate: an exported
    SavedModel (a folder), whose class scores keras_caps cannot take
    gradients of; the attacks need the `.keras` model."""
    if model_path is not None and os.path.isdir(model_path):
        raise ValueError(
            f"Received an invalid value for `{argument_name}`: the attacks "
            "(FGSM, PGD, the vote attack) follow the gradient of the "
            "model's class scores, and a folder (an exported SavedModel) "
            "has none keras_caps can take. Attack the `.keras` model it was "
            f"exported from. Received: {argument_name}={model_path!r}")
