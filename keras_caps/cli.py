"""The `keras-caps` command: train, evaluate and export capsule networks.

Examples:

    keras-caps train --dataset mnist --data-dir ../shared/data/mnist
    keras-caps evaluate --model-path runs/efficient_capsnet_mnist/model.keras \
        --dataset mnist --data-dir ../shared/data/mnist
    keras-caps export --model-path runs/efficient_capsnet_mnist/model.keras \
        --export-dir exported/mnist
    keras-caps plot reconstructions \
        --model-path runs/efficient_capsnet_mnist/model.keras \
        --data-dir ../shared/data/mnist --output reconstructions.png
"""

import argparse
import json
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-caps",
        description="Train, evaluate and export capsule networks.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train_command(commands)
    _add_evaluate_command(commands)
    _add_export_command(commands)
    _add_plot_command(commands)
    return parser


def _add_train_command(commands):
    from keras_caps.datasets import DATASETS
    from keras_caps.training import MODELS
    from keras_caps.training import PRECISIONS
    from keras_caps.training import STRATEGIES

    train = commands.add_parser(
        "train", help="Train a model, select it on validation data, test "
        "it, save it and export it.")
    train.add_argument("--model", default="efficient_capsnet",
                       choices=sorted(MODELS))
    train.add_argument("--dataset", default="mnist", choices=sorted(DATASETS))
    train.add_argument("--epochs", type=_positive_int, default=None,
                       help="Defaults to the model preset's (150 for "
                       "EfficientCapsNet).")
    train.add_argument("--batch-size", type=_positive_int, default=None,
                       help="Global batch size. Defaults to the model "
                       "preset's (16 for EfficientCapsNet).")
    train.add_argument("--steps-per-epoch", type=_positive_int, default=None,
                       help="Limit each epoch to this many steps.")
    train.add_argument("--precision", default="float32", choices=PRECISIONS,
                       help="mixed_float16 is for NVIDIA GPUs: CPUs compute "
                       "float16 convolution gradients many times slower, "
                       "and it warns there. mixed_bfloat16 "
                       "is faster than float32 on CPUs with AVX-512 and on "
                       "TPUs.")
    train.add_argument("--strategy", default="auto", choices=STRATEGIES,
                       help="auto: a TPU, else several GPUs, else one "
                       "device.")
    _add_data_arguments(train)
    train.add_argument("--output-dir", default=None,
                       help="Defaults to runs/<model>_<dataset>.")
    train.add_argument("--seed", type=int, default=42)
    train.add_argument("--validation", default="holdout",
                       choices=("holdout", "test"),
                       help="holdout: select the model on 10%% of the "
                       "training data (default); test: the official "
                       "protocol, test set as validation.")
    train.add_argument("--no-reconstruction", dest="reconstruction",
                       action="store_false", default=None,
                       help="Train without the decoder (models that have "
                       "one train with it by default).")
    train.add_argument("--deterministic", action="store_true",
                       help="Enable TensorFlow op determinism.")
    train.add_argument("--backup-frequency", type=_positive_int, default=500,
                       help="Steps between crash-recovery backups.")


def _add_evaluate_command(commands):
    from keras_caps.datasets import DATASETS

    evaluate = commands.add_parser(
        "evaluate", help="Evaluate a saved .keras model on the test split.")
    evaluate.add_argument("--model-path", required=True)
    evaluate.add_argument("--dataset", default="mnist",
                          choices=sorted(DATASETS))
    evaluate.add_argument("--batch-size", type=_positive_int, default=16)
    _add_data_arguments(evaluate)
    evaluate.add_argument("--seed", type=int, default=42)
    evaluate.add_argument("--output", default=None,
                          help="Also write the metrics to this JSON file.")


def _add_export_command(commands):
    from keras_caps.training import PRECISIONS

    export = commands.add_parser(
        "export", help="Export a saved .keras model as a SavedModel that "
        "serves raw images.")
    export.add_argument("--model-path", required=True)
    export.add_argument("--export-dir", required=True)
    export.add_argument("--reconstruction", action="store_true",
                        help="Also serve the reconstruction.")
    export.add_argument("--overwrite", action="store_true",
                        help="Replace a previous keras-caps export at "
                        "--export-dir. Anything else there (a file, other "
                        "files, a SavedModel from elsewhere) is never "
                        "replaced.")
    export.add_argument("--precision", default=None, choices=PRECISIONS,
                        help="Precision of the served convolutions: "
                        "mixed_bfloat16 is faster on CPUs with "
                        "bfloat16 instructions. Defaults to the model's.")


def _add_plot_command(commands):
    from keras_caps.datasets import DATASETS
    from keras_caps.visualization import PLOT_KINDS

    plot = commands.add_parser(
        "plot", help="Draw a figure of a saved model (or of a training "
        "log) as a PNG file. Needs matplotlib: pip install "
        "\"keras-caps[plot]\".")
    plot.add_argument("kind", choices=PLOT_KINDS,
                      help="reconstructions: test images and their "
                      "reconstructions; perturbation: the predicted class "
                      "capsule decoded with each dimension shifted; "
                      "routing: coupling coefficients of the routing "
                      "layers; credit: VectorRouting credit over the "
                      "images; curves: loss and accuracy per epoch.")
    plot.add_argument("--model-path", default=None,
                      help="The saved .keras model (every kind but "
                      "curves).")
    plot.add_argument("--log", default=None,
                      help="curves: the CSV log. Defaults to history.csv "
                      "beside --model-path.")
    plot.add_argument("--dataset", default="mnist", choices=sorted(DATASETS))
    _add_data_arguments(plot)
    plot.add_argument("--num-images", type=_positive_int, default=10,
                      help="reconstructions, credit: how many test images.")
    plot.add_argument("--index", type=_non_negative_int, default=0,
                      help="perturbation, routing: which test image.")
    plot.add_argument("--class-index", type=_non_negative_int, default=None,
                      help="perturbation, credit: the class. Defaults to "
                      "the predicted one.")
    plot.add_argument("--layer", dest="layers", action="append",
                      default=None,
                      help="routing: a routing layer to draw (repeatable). "
                      "Defaults to all.")
    plot.add_argument("--output", default=None,
                      help="The PNG file. Defaults to <kind>.png.")
    plot.add_argument("--dpi", type=_positive_int, default=100)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"keras-caps {args.command}: error: {error}", file=sys.stderr)
        return 2


def _run(args):
    from keras_caps import training

    options = {}
    if getattr(args, "partners_per_digit", None) is not None:
        options["partners_per_digit"] = args.partners_per_digit
    if args.command == "train":
        output_dir = args.output_dir or os.path.join(
            "runs", f"{args.model}_{args.dataset}")
        record = training.train(
            args.model, args.dataset, output_dir=output_dir,
            epochs=args.epochs, batch_size=args.batch_size,
            precision=args.precision, strategy=args.strategy,
            data_dir=args.data_dir, seed=args.seed,
            validation=args.validation, reconstruction=args.reconstruction,
            deterministic=args.deterministic,
            steps_per_epoch=args.steps_per_epoch,
            backup_frequency=args.backup_frequency,
            dataset_options=options, download=args.download)
        print(json.dumps(record, indent=2, sort_keys=True))
        print(f"Saved model, export and metrics under {output_dir}")
    elif args.command == "evaluate":
        record = training.evaluate(
            args.model_path, args.dataset, batch_size=args.batch_size,
            data_dir=args.data_dir, seed=args.seed, dataset_options=options,
            download=args.download)
        if args.output:
            from keras_caps.training.atomic_files import write_json_atomically

            write_json_atomically(args.output, record)
        print(json.dumps(record, indent=2, sort_keys=True))
    elif args.command == "plot":
        from keras_caps.visualization import plot_to_file

        output = args.output or f"{args.kind}.png"
        try:
            plot_to_file(
                args.kind, output, model_path=args.model_path,
                log_path=args.log, dataset=args.dataset,
                data_dir=args.data_dir, num_images=args.num_images,
                index=args.index, class_index=args.class_index,
                layer_names=args.layers, dpi=args.dpi,
                dataset_options=options, download=args.download)
        except ImportError as error:  # matplotlib is an optional extra.
            print(f"keras-caps plot: error: {error}", file=sys.stderr)
            return 2
        print(f"Wrote {output}")
    else:
        import keras

        from keras_caps.export import check_export_target
        from keras_caps.export import export_inference_model

        if not os.path.exists(args.model_path):
            raise ValueError("No model at `--model-path`. Received: "
                             f"{args.model_path!r}")
        # Checked before the (slow) model load as well as by the export.
        check_export_target(args.export_dir, overwrite=args.overwrite,
                            model_path=args.model_path)
        export_inference_model(keras.saving.load_model(args.model_path),
                               args.export_dir,
                               reconstruction=args.reconstruction,
                               precision=args.precision,
                               overwrite=args.overwrite,
                               model_path=args.model_path)
        print(f"Exported the inference model to {args.export_dir}")
    return 0


def _add_data_arguments(parser):
    parser.add_argument("--data-dir", default=None,
                        help="Folder with the raw dataset files (for MNIST "
                        "the four IDX .gz files; for smallnorb and cifar a "
                        "TFDS data directory). Defaults to "
                        "$KERAS_CAPS_DATA_DIR, then TFDS, which downloads "
                        "a dataset on first use into its data directory "
                        "($TFDS_DATA_DIR, else ~/tensorflow_datasets).")
    parser.add_argument("--no-download", dest="download",
                        action="store_false",
                        help="Never download: read prepared TFDS datasets "
                        "only (failing at once when one is missing).")
    parser.add_argument("--partners-per-digit", type=_positive_int,
                        default=None,
                        help="MultiMNIST test partners per digit (1000).")


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, received {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, received {text!r}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, received {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, received {text!r}")
    return value


if __name__ == "__main__":
    sys.exit(main())
