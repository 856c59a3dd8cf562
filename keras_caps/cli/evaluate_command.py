"""`keras-caps evaluate`: test metrics of a saved model or official weights,
on clean and, optionally, corrupted test data."""

import json
import sys

from keras_caps.cli.argument_types import positive_int
from keras_caps.cli.shared_arguments import add_corruption_arguments
from keras_caps.cli.shared_arguments import add_data_arguments
from keras_caps.cli.shared_arguments import dataset_options
from keras_caps.cli.shared_arguments import requested_corruptions
from keras_caps.training.output_files import WRITTEN_BY
from keras_caps.training.output_files import check_output_path

EVALUATE_MARK = "keras-caps evaluate"
"""The `written_by` mark of the `--output` file: only such a file is
replaced by a later `keras-caps evaluate --output`."""


def add_evaluate_command(commands):
    """Registers `evaluate` and its handler on the subparsers `commands`."""
    from keras_caps.datasets import DATASETS

    evaluate = commands.add_parser(
        "evaluate", help="Evaluate a saved .keras model, or official "
        "Efficient-CapsNet/CapsNet .h5 weights, on the test split.")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-path")
    source.add_argument("--weights", default=None,
                        help="An official Keras 2 .h5 weights file: builds "
                        "--model for --dataset and loads it.")
    evaluate.add_argument("--model", default="efficient_capsnet",
                          choices=["efficient_capsnet", "capsnet"],
                          help="The model the --weights belong to.")
    evaluate.add_argument("--dataset", default="mnist",
                          choices=sorted(DATASETS))
    evaluate.add_argument("--batch-size", type=positive_int, default=16)
    add_data_arguments(evaluate)
    evaluate.add_argument("--seed", type=int, default=42)
    evaluate.add_argument("--output", default=None,
                          help="Also write the metrics to this JSON file "
                          "(a new file, or one an earlier `keras-caps "
                          "evaluate --output` wrote; any other file is "
                          "never replaced).")
    add_corruption_arguments(evaluate)
    evaluate.set_defaults(handler=run_evaluate)


def run_evaluate(args):
    """Evaluates as the flags say and prints the metrics record.

    Returns 0, or 1 when the metrics could not be written to `--output`.
    """
    corruptions = requested_corruptions(args)
    # Checked before the (slow) evaluation.
    _check_evaluate_arguments(args, corruptions)
    options = dataset_options(args)
    record = _evaluate_clean(args, options)
    if corruptions:
        from keras_caps.evaluation import evaluate_robustness

        record["robustness"] = evaluate_robustness(
            args.model_path, args.dataset, corruptions=corruptions,
            data_dir=args.data_dir, seed=args.corruption_seed,
            dataset_options=options, download=args.download)
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
    if corruptions:
        from keras_caps.evaluation.robustness import check_corruptions

        if args.weights:
            raise ValueError(
                "The corruption options evaluate a saved model: use "
                "them with `--model-path`, not `--weights`. Received: "
                f"--weights={args.weights!r}")
        check_corruptions(args.dataset, corruptions)


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

    return training.evaluate(
        args.model_path, args.dataset, batch_size=args.batch_size,
        data_dir=args.data_dir, seed=args.seed,
        dataset_options=options, download=args.download)


def _write_output(path, record):
    from keras_caps.training.atomic_files import write_json_atomically

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
