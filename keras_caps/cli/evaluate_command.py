"""`keras-caps evaluate`: test metrics of a saved model or official weights,
on clean and, optionally, corrupted test data."""

import json
import os
import sys

from keras_caps.cli.argument_types import positive_int
from keras_caps.cli.attack_arguments import add_attack_arguments
from keras_caps.cli.attack_arguments import check_attack_images_flag
from keras_caps.cli.attack_arguments import requested_attacks
from keras_caps.cli.class_report_files import CLASS_REPORT_FILE
from keras_caps.cli.class_report_files import CONFUSION_FIGURE
from keras_caps.cli.class_report_files import check_class_report_folder
from keras_caps.cli.class_report_files import write_class_report
from keras_caps.cli.shared_arguments import add_corruption_arguments
from keras_caps.cli.shared_arguments import add_data_arguments
from keras_caps.cli.shared_arguments import add_user_data_arguments
from keras_caps.cli.shared_arguments import dataset_help
from keras_caps.cli.shared_arguments import dataset_name
from keras_caps.cli.shared_arguments import dataset_options
from keras_caps.cli.shared_arguments import requested_corruptions
from keras_caps.cli.shared_arguments import user_data_options
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.runs.output_files import WRITTEN_BY
from keras_caps.runs.output_files import check_output_path

EVALUATE_MARK = "keras-caps evaluate"
"""The `written_by` mark of the `--output` file: only such a file is
replaced by a later `keras-caps evaluate --output`."""


def add_evaluate_command(commands):
    """Registers `evaluate` and its handler on the subparsers `commands`."""
    evaluate = commands.add_parser(
        "evaluate", help="Evaluate a saved .keras model, an export of "
        "one (any `keras-caps export` format, in its own runtime), or "
        "official Efficient-CapsNet/CapsNet .h5 weights, on the test "
        "split.")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-path",
                        help="A .keras file, or an export folder written "
                        "by `keras-caps export` (SavedModel, ONNX, LiteRT, "
                        "OpenVINO): its test accuracy in its runtime, on "
                        "the test set of the .keras file it was exported "
                        "from.")
    source.add_argument("--weights", default=None,
                        help="An official Keras 2 .h5 weights file: builds "
                        "--model for --dataset and loads it.")
    evaluate.add_argument("--model", default="efficient_capsnet",
                          choices=["efficient_capsnet", "capsnet"],
                          help="The model the --weights belong to.")
    evaluate.add_argument("--dataset", default="mnist", type=dataset_name,
                          help=dataset_help(
                              " Your own data is read as the run that "
                              "trained --model-path read it (its "
                              "metrics.json), unless the flags below say "
                              "otherwise."))
    evaluate.add_argument("--batch-size", type=positive_int, default=16)
    add_data_arguments(evaluate)
    add_user_data_arguments(evaluate)
    evaluate.add_argument("--seed", type=int, default=42)
    evaluate.add_argument("--output", default=None,
                          help="Also write the metrics to this JSON file "
                          "(a new file, or one an earlier `keras-caps "
                          "evaluate --output` wrote; any other file is "
                          "never replaced).")
    evaluate.add_argument("--class-report", default=None, metavar="DIR",
                          help="Also write per-class precision, recall, "
                          "F1 and support, their macro and weighted "
                          "averages and the confusion matrix to "
                          f"DIR/{CLASS_REPORT_FILE}, and the confusion "
                          f"matrix as a figure to DIR/{CONFUSION_FIGURE} "
                          "(needs matplotlib: pip install "
                          "'keras-caps[plot]'). Files already there are "
                          "never replaced.")
    add_corruption_arguments(evaluate)
    add_attack_arguments(evaluate)
    evaluate.add_argument("--adapt-batchnorm", action="store_true",
                          help="With corruptions or attacks: also classify "
                          "each test "
                          "set with every BatchNormalization layer's "
                          "statistics re-estimated on that set (test-time "
                          "adaptation, Schneider et al. 2020); the model "
                          "file is not changed.")
    evaluate.add_argument("--predictions-dir", default=None,
                          help="With corruptions or attacks: write the "
                          "predicted "
                          "class of every test image (predictions.npz) "
                          "and the confusion matrices (confusion.npz) to "
                          "this folder.")
    evaluate.set_defaults(handler=run_evaluate)


def run_evaluate(args):
    """Evaluates as the flags say and prints the metrics record.

    Returns 0, or 1 when the metrics could not be written to `--output`.
    """
    corruptions = requested_corruptions(args)
    attacks = requested_attacks(args)
    # Checked before the (slow) evaluation.
    _check_evaluate_arguments(args, corruptions)
    if attacks:
        _check_attack_arguments(args, attacks)
    options = dataset_options(args)
    record = _evaluate_clean(args, options)
    if args.class_report:
        record["class_report"] = write_class_report(
            args.class_report, record["class_report"])
    if corruptions or attacks:
        from keras_caps.evaluation import evaluate_robustness

        record["robustness"] = evaluate_robustness(
            args.model_path, args.dataset, corruptions=corruptions,
            data_dir=args.data_dir, seed=args.corruption_seed,
            dataset_options=options, download=args.download,
            predictions_dir=args.predictions_dir,
            adapt_batchnorm=args.adapt_batchnorm, attacks=attacks)
    if args.output:  # The mark that lets a later evaluate replace it.
        record[WRITTEN_BY] = EVALUATE_MARK
    # Printed first: a failed write below does not lose the metrics.
    print(json.dumps(record, indent=2, sort_keys=True))
    if args.output:
        return _write_output(args.output, record)
    return 0


def _check_evaluate_arguments(args, corruptions):
    if args.output:
        check_output_path(args.output, EVALUATE_MARK, "--output")
    if args.class_report:
        check_class_report_folder(args.class_report, args.dataset,
                                  args.weights)
    user_data = is_user_dataset(args.dataset)
    if user_data and args.weights:
        raise ValueError(
            "--weights loads official weights of a built-in dataset; "
            "evaluate a model trained on your own data with --model-path. "
            f"Received: --dataset {args.dataset}")
    if not user_data:
        _refuse_user_data_flags(args)
    if user_data and corruptions:
        raise ValueError(
            "The corruption options (--noise, --pixel-corruption, "
            "--occlusion, --affine) read the built-in datasets' test sets; "
            "they do not run on your own data yet. Evaluate it without "
            f"them. Received: --dataset {args.dataset}")
    if not corruptions and not (args.fgsm or args.pgd) and (
            args.adapt_batchnorm or args.predictions_dir):
        raise ValueError(
            "--adapt-batchnorm and --predictions-dir apply to the "
            "robustness evaluation: add a corruption (--noise, "
            "--pixel-corruption, --occlusion or --affine) or an attack "
            "(--fgsm, --pgd). Received: "
            f"--adapt-batchnorm={args.adapt_batchnorm}, --predictions-dir="
            f"{args.predictions_dir!r}")
    if args.predictions_dir:
        _check_predictions_dir(args.predictions_dir)
    if corruptions and args.model_path and os.path.isdir(args.model_path):
        raise ValueError(
            "The corruptions (--noise, --pixel-corruption, --occlusion, "
            "--affine) evaluate a .keras model; an export folder is "
            "scored on the clean test set only. Pass the .keras file it "
            f"was exported from. Received: --model-path {args.model_path!r}")
    if corruptions:
        from keras_caps.evaluation.robustness import check_corruptions

        if args.weights:
            raise ValueError(
                "The corruption options evaluate a saved model: use "
                "them with `--model-path`, not `--weights`. Received: "
                f"--weights={args.weights!r}")
        check_corruptions(args.dataset, corruptions)
        from keras_caps.evaluation.multi_digit_robustness import (
            check_multi_digit_evaluation,
        )

        check_multi_digit_evaluation(args.dataset, dataset_options(args))


def _check_attack_arguments(args, attacks):
    """Refuses attacks on what they cannot run on: official weights,
    a user's dataset, an exported SavedModel (no gradients)."""
    from keras_caps.evaluation import attack_evaluation
    from keras_caps.evaluation.multi_digit_robustness import (
        check_multi_digit_evaluation,
    )
    from keras_caps.evaluation.robustness import check_corruptions

    if args.weights:
        raise ValueError(
            "The attacks (--fgsm, --pgd) evaluate a saved model: use them "
            "with `--model-path`, not `--weights`. Received: "
            f"--weights={args.weights!r}")
    if is_user_dataset(args.dataset):
        raise ValueError(
            "The attacks (--fgsm, --pgd) read the built-in datasets' test "
            "sets; they do not run on your own data yet. Evaluate it "
            f"without them. Received: --dataset {args.dataset}")
    attack_evaluation.check_attack_model(args.model_path, "--model-path")
    attacks = attack_evaluation.check_attacks(attacks)
    check_corruptions(args.dataset, {})
    check_multi_digit_evaluation(args.dataset, attacks=attacks)
    check_attack_images_flag(attacks, args.dataset)


def _check_predictions_dir(folder):
    """Refuses a `--predictions-dir` whose files would be replaced."""
    from keras_caps.evaluation import predictions
    from keras_caps.runs.output_files import check_files_absent

    check_files_absent(folder, (predictions.PREDICTIONS_FILE,
                                predictions.CONFUSION_FILE),
                       "--predictions-dir")


def _refuse_user_data_flags(args):
    given = [flag for flag, value in (
        ("--image-size", args.image_size), ("--color-mode", args.color_mode),
        ("--test-dir", args.test_dir), ("--test-share", args.test_share))
        if value is not None]
    if given:
        raise ValueError(
            "The options of your own data (--dataset folder:PATH, "
            f"npz:PATH or tfds:NAME) do not apply to {args.dataset!r}, "
            "which has a fixed image size and test split: drop "
            f"{', '.join(given)}. Received: --dataset {args.dataset}")


def _evaluate_clean(args, options):
    """The test metrics of `--weights` or of `--model-path`."""
    if args.weights:
        from keras_caps.training.official_evaluation import (
            evaluate_official_weights,
        )

        return evaluate_official_weights(
            args.weights, args.dataset, model=args.model,
            batch_size=args.batch_size, data_dir=args.data_dir,
            seed=args.seed, dataset_options=options,
            download=args.download)
    from keras_caps import training

    if args.model_path and os.path.isdir(args.model_path):  # An export.
        return training.evaluate_export(
            args.model_path, args.dataset, batch_size=args.batch_size,
            data_dir=args.data_dir, seed=args.seed,
            dataset_options=options, download=args.download,
            class_report=bool(args.class_report), **user_data_options(args))
    return training.evaluate(
        args.model_path, args.dataset, batch_size=args.batch_size,
        data_dir=args.data_dir, seed=args.seed,
        dataset_options=options, download=args.download,
        class_report=bool(args.class_report), **user_data_options(args))


def _write_output(path, record):
    from keras_caps.runs.atomic_files import write_json_atomically

    try:
        # Checked again: the file may have appeared during the evaluation.
        check_output_path(path, EVALUATE_MARK, "--output")
        write_json_atomically(path, record)
    except (OSError, ValueError) as error:
        print(f"keras-caps evaluate: error: could not write "
              f"`--output` {path!r} ({error}); the metrics "
              "are printed above.", file=sys.stderr)
        return 1
    return 0
