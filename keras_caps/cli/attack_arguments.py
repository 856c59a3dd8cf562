"""The attack flags of `keras-caps evaluate` and `keras-caps compare`.

`--fgsm`, `--pgd`, `--pgd-steps`, `--pgd-restarts`, `--attack-loss`,
`--vote-attack`, `--masking-epsilon` and `--attack-images`;
`requested_attacks(args)` turns them into the `attacks` of
`keras_caps.evaluation.evaluate_robustness` and `compare` (see
`keras_caps.evaluation.attack_evaluation`).
"""

import argparse

from keras_caps.cli.argument_types import float_list
from keras_caps.cli.argument_types import positive_int

_LOSSES = ("margin", "cross_entropy", "score_margin")


def epsilon_list(text):
    """`"0.05,0.1"` -> `[0.05, 0.1]`; refuses epsilons outside [0, 1]."""
    values = float_list(text)
    if not values or any(not 0.0 <= value <= 1.0 for value in values):
        raise argparse.ArgumentTypeError(
            "expected comma-separated epsilons in [0, 1] (fractions of the "
            f"pixel range 0-255), received {text!r}")
    return values


def masking_epsilon(text):
    """`"0.5"` -> `0.5`; `"0"` -> `None` (no run of its own)."""
    values = epsilon_list(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(
            f"expected one epsilon in [0, 1], received {text!r}")
    return values[0] or None


def add_attack_arguments(parser):
    """Registers the attack flags on `parser`."""
    group = parser.add_argument_group(
        "adversarial attacks (L-inf; epsilons are fractions of the pixel "
        "range 0-255, e.g. 0.1 = 25.5 levels)")
    group.add_argument("--fgsm", type=epsilon_list, default=None,
                       metavar="EPSILONS",
                       help="FGSM epsilons, comma-separated, in [0, 1].")
    group.add_argument("--pgd", type=epsilon_list, default=None,
                       metavar="EPSILONS",
                       help="PGD epsilons, comma-separated, in [0, 1] "
                       "(random start, steps of 2.5 epsilon / steps).")
    group.add_argument("--pgd-steps", type=positive_int, default=10,
                       help="PGD steps (default 10).")
    group.add_argument("--pgd-restarts", type=positive_int, default=1,
                       help="PGD random starts per image, the strongest "
                       "kept (default 1).")
    group.add_argument("--attack-loss", default="score_margin",
                       choices=_LOSSES,
                       help="The loss the attacks raise: the class-score "
                       "margin max_(j!=t) s_j - s_t (Carlini-Wagner; "
                       "default), the capsule margin loss (flat on "
                       "images the model is confident about), or softmax "
                       "cross-entropy on the scores.")
    group.add_argument("--vote-attack", action="store_true",
                       help="Also the vote attack (Gu, Wu & Tresp 2021) "
                       "at the --pgd epsilons: PGD on the votes averaged "
                       "over the child capsules, bypassing routing (a "
                       "model without votes gets its PGD result).")
    group.add_argument("--masking-epsilon", type=masking_epsilon,
                       default=0.5, metavar="EPSILON",
                       help="The large epsilon of the gradient-masking "
                       "check 'near 0 at a large epsilon', run as one more "
                       "PGD epsilon with any attack (default 0.5; 0: no "
                       "run of its own, the largest --pgd epsilon).")
    group.add_argument("--attack-images", type=positive_int, default=None,
                       metavar="N",
                       help="Attack only the first N test images (in the "
                       "test set's fixed order), for every attack column, "
                       "the transfer attack and the masking checks' clean "
                       "reference (default: every test image).")


def requested_attacks(args):
    """The attacks the flags ask for, as `evaluate_robustness` and
    `compare` take them; `None` without `--fgsm` and `--pgd`.

    Raises:
        ValueError: `--vote-attack` (or another attack option) without
            `--pgd`; duplicate epsilons.
    """
    if args.vote_attack and not args.pgd:
        raise ValueError(
            "--vote-attack runs the vote attack at the --pgd epsilons, and "
            "none is given: add --pgd (e.g. --pgd 0.1). Received: "
            "--vote-attack without --pgd")
    if not args.fgsm and not args.pgd:
        given = attack_flags_given(args)
        if given:
            raise ValueError(
                f"{', '.join(given)} set the attacks of --fgsm and --pgd, "
                "and neither is given: add one, or drop them. Received: "
                f"{', '.join(given)} without --fgsm or --pgd")
        return None
    for flag, values in (("--fgsm", args.fgsm), ("--pgd", args.pgd)):
        if values and len(set(values)) != len(values):
            raise ValueError(
                f"Duplicate epsilons in {flag}. Received: {flag} "
                f"{','.join(str(value) for value in values)}")
    return {"fgsm": args.fgsm or [], "pgd": args.pgd or [],
            "pgd_steps": args.pgd_steps, "pgd_restarts": args.pgd_restarts,
            "loss": args.attack_loss, "vote": args.vote_attack,
            "large_epsilon": args.masking_epsilon,
            **({"attack_images": args.attack_images}
               if args.attack_images is not None else {})}


def check_attack_images_flag(attacks, dataset):
    """Refuses `--attack-images` above the size of `dataset`'s standard
    test split (`DATASETS[dataset].num_test`) before anything is trained
    or written; the evaluation checks it again against the test images
    it reads (a folder of one's own may hold fewer).

    Raises:
        ValueError: naming `--attack-images`.
    """
    from keras_caps.datasets import DATASETS

    count = (attacks or {}).get("attack_images")
    info = DATASETS.get(dataset)
    if count is not None and info is not None and count > info.num_test:
        raise ValueError(
            f"--attack-images {count} is more than the {info.num_test} "
            f"test images of {dataset!r}: give at most {info.num_test}, "
            "or drop it to attack every test image. Received: "
            f"--attack-images {count}")


def attack_flags_given(args):
    """The attack options given without `--fgsm` or `--pgd` (which
    then do nothing): e.g. `["--pgd-steps"]`."""
    if args.fgsm or args.pgd:
        return []
    defaults = {"pgd_steps": 10, "pgd_restarts": 1,
                "attack_loss": "score_margin", "masking_epsilon": 0.5,
                "attack_images": None}
    return [f"--{name.replace('_', '-')}" for name, default
            in defaults.items() if getattr(args, name) != default]
