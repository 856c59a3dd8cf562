"""The `keras-caps` command: train, evaluate and export capsule networks.

Examples:

    keras-caps train --dataset mnist --data-dir ../shared/data/mnist
    keras-caps evaluate --model-path runs/efficient_capsnet_mnist/model.keras \
        --dataset mnist --data-dir ../shared/data/mnist
    keras-caps evaluate --weights efficient_capsnet_MNIST.h5 --dataset mnist
    keras-caps export --model-path runs/efficient_capsnet_mnist/model.keras \
        --export-dir exported/mnist
    keras-caps plot reconstructions \
        --model-path runs/efficient_capsnet_mnist/model.keras \
        --data-dir ../shared/data/mnist --output reconstructions.png
    keras-caps compare --routers self_attention,dynamic,cnn --seeds 0,1 \
        --epochs 2 --noise 0.1,0.2,0.4 --data-dir ../shared/data/mnist
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
    _add_compare_command(commands)
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
    train.add_argument("--fresh", action="store_true",
                       help="Delete what an earlier run wrote in "
                       "--output-dir (its run.json, backup/, checkpoints/, "
                       "history.csv, logs/, model.keras, keras-caps "
                       "export/ and metrics.json; nothing else) and train "
                       "from scratch. Without it, a folder made with other "
                       "settings is refused and one with the same settings "
                       "is resumed.")
    train.add_argument("--worker-timeout", type=_positive_float,
                       default=600.0, metavar="SECONDS",
                       help="multi_worker: how long to wait for the other "
                       "workers to start before giving up (default 600).")
    train.add_argument("--routing-temperature", type=float, default=None,
                       help="Anneal the routing temperature of every router "
                       "from this value (tau_0); logged per epoch.")
    train.add_argument("--temperature-decay", type=float, default=0.0,
                       help="Decay per step: tau_t = max(tau_min, tau_0 "
                       "exp(-decay t)). Default: 0 (constant).")
    train.add_argument("--min-temperature", type=float, default=None,
                       help="The floor tau_min. Default: min(1, tau_0).")


def _add_evaluate_command(commands):
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
    evaluate.add_argument("--batch-size", type=_positive_int, default=16)
    _add_data_arguments(evaluate)
    evaluate.add_argument("--seed", type=int, default=42)
    evaluate.add_argument("--output", default=None,
                          help="Also write the metrics to this JSON file.")
    _add_corruption_arguments(evaluate)


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
    export.add_argument("--input-range", default="pixels",
                        choices=("pixels", "unit"),
                        help="What the served signature takes: pixels "
                        "(default), raw pixels in [0, 255] as the model "
                        "was trained on; unit, images in [0, 1], which the "
                        "signature multiplies by 255.")
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
    except (OSError, RuntimeError) as error:
        # The environment, not the arguments: a folder in use (run.lock),
        # workers that never started, a full or read-only disk.
        from keras_caps.training.run_lock import FolderInUseError

        if isinstance(error, RuntimeError) and not isinstance(
                error, FolderInUseError):
            raise
        print(f"keras-caps {args.command}: error: {_one_line(error)}",
              file=sys.stderr)
        return 1


def _one_line(error):
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.strerror}: {error.filename!r}"
    return " ".join(str(error).split())


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
            dataset_options=options, fresh=args.fresh,
            worker_timeout=args.worker_timeout,
            routing_temperature=args.routing_temperature,
            temperature_decay=args.temperature_decay,
            min_temperature=args.min_temperature, download=args.download)
        print(json.dumps(record, indent=2, sort_keys=True))
        print(f"Saved model, export and metrics under {output_dir}")
    elif args.command == "evaluate":
        if args.output:  # Checked before the (slow) evaluation.
            _check_output_file(args.output, "--output")
        corruptions = _corruptions(args)
        if corruptions:  # Checked before the (slow) clean evaluation.
            from keras_caps.evaluation.robustness import check_corruptions

            if args.weights:
                raise ValueError(
                    "The corruption options evaluate a saved model: use "
                    "them with `--model-path`, not `--weights`. Received: "
                    f"--weights={args.weights!r}")
            check_corruptions(args.dataset, corruptions)
        if args.weights:
            from keras_caps.training.official_evaluation import (
                evaluate_official_weights,
            )

            record = evaluate_official_weights(
                args.weights, args.dataset, model=args.model,
                batch_size=args.batch_size, data_dir=args.data_dir,
                seed=args.seed, dataset_options=options,
                download=args.download)
        else:
            record = training.evaluate(
                args.model_path, args.dataset, batch_size=args.batch_size,
                data_dir=args.data_dir, seed=args.seed,
                dataset_options=options, download=args.download)
        if corruptions:
            from keras_caps.evaluation import evaluate_robustness

            record["robustness"] = evaluate_robustness(
                args.model_path, args.dataset, corruptions=corruptions,
                data_dir=args.data_dir, seed=args.corruption_seed,
                dataset_options=options, download=args.download)
        # Printed first: a failed write below does not lose the metrics.
        print(json.dumps(record, indent=2, sort_keys=True))
        if args.output:
            from keras_caps.training.atomic_files import write_json_atomically

            try:
                write_json_atomically(args.output, record)
            except OSError as error:
                print(f"keras-caps evaluate: error: could not write "
                      f"`--output` {args.output!r} ({error}); the metrics "
                      "are printed above.", file=sys.stderr)
                return 1
    elif args.command == "compare":
        return _run_compare(args)
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
        from keras_caps.export import check_export_target
        from keras_caps.export import export_inference_model
        from keras_caps.inference import load_model_file

        if not os.path.exists(args.model_path):
            raise ValueError("No model at `--model-path`. Received: "
                             f"{args.model_path!r}")
        # Checked before the (slow) model load as well as by the export.
        check_export_target(args.export_dir, overwrite=args.overwrite,
                            model_path=args.model_path)
        export_inference_model(load_model_file(args.model_path,
                                               "--model-path"),
                               args.export_dir,
                               reconstruction=args.reconstruction,
                               precision=args.precision,
                               overwrite=args.overwrite,
                               model_path=args.model_path,
                               input_range=args.input_range)
        print(f"Exported the inference model to {args.export_dir}")
    return 0


def _check_output_file(path, argument_name):
    """Raises a `ValueError` unless a file can be written at `path`."""
    if os.path.isdir(path):
        raise ValueError(f"`{argument_name}` is a folder; expected a file "
                         f"path. Received: {argument_name}={path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):  # The nearest existing folder above.
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(
            f"`{argument_name}` cannot be written: {folder!r} is not a "
            f"writable folder. Received: {argument_name}={path!r}")


def _add_compare_command(commands):
    from keras_caps.evaluation.comparison import COMPARED_MODELS

    compare = commands.add_parser(
        "compare", help="Train CapsuleClassifier with each router (and the "
        "CNN baseline) for each seed under one recipe, evaluate them on "
        "clean and corrupted test data, and write a table (Markdown, CSV, "
        "JSON) and a plot. Resumable.")
    compare.add_argument("--routers", type=_name_list,
                         default=list(COMPARED_MODELS),
                         help="Comma-separated, among "
                         f"{','.join(COMPARED_MODELS)}. Defaults to all.")
    compare.add_argument("--dataset", default="mnist",
                         choices=("mnist", "fashion_mnist", "smallnorb",
                                  "mnist_canvas"),
                         help="mnist_canvas: MNIST digits placed at random "
                         "on a 40x40 canvas (generated), for --affine.")
    compare.add_argument("--seeds", type=_int_list, default=[0, 1],
                         help="Comma-separated seeds, one model per router "
                         "and seed. Defaults to 0,1.")
    compare.add_argument("--epochs", type=_positive_int, default=None,
                         help="Defaults to the preset's (150).")
    compare.add_argument("--steps-per-epoch", type=_positive_int,
                         default=None,
                         help="Limit each epoch to this many steps.")
    compare.add_argument("--batch-size", type=_positive_int, default=None,
                         help="Defaults to the preset's (16).")
    compare.add_argument("--validation", default="holdout",
                         choices=("holdout", "test"))
    compare.add_argument("--no-reconstruction", dest="reconstruction",
                         action="store_false", default=True,
                         help="Train the capsule models without their "
                         "decoder.")
    compare.add_argument("--isolation", default="process",
                         choices=("process", "session"),
                         help="process: each model in a process of its own "
                         "(flat memory); session: all in this process, "
                         "clearing the Keras session between models.")
    _add_data_arguments(compare)
    compare.add_argument("--output-dir", default=None,
                         help="Defaults to runs/compare_<dataset>.")
    _add_corruption_arguments(compare)


def _add_corruption_arguments(parser):
    parser.add_argument("--noise", type=_float_list, default=None,
                        help="Gaussian noise standard deviations, fractions "
                        "of the pixel range in [0, 1], comma-separated.")
    parser.add_argument("--pixel-corruption", type=_float_list,
                        default=None,
                        help="Fractions of pixels replaced by uniform noise, "
                        "in [0, 1], comma-separated.")
    parser.add_argument("--occlusion", type=_int_list, default=None,
                        help="Sides in pixels of a randomly placed blanked "
                        "square, comma-separated.")
    parser.add_argument("--affine", action="store_true",
                        help="The generated affNIST-style test set (MNIST "
                        "test digits rotated, sheared, scaled and "
                        "translated on a 40x40 canvas); for models trained "
                        "on --dataset mnist_canvas.")
    parser.add_argument("--corruption-seed", type=int, default=1234,
                        help="Seeds the corruptions (the same images for "
                        "every model).")


def _corruptions(args):
    corruptions = {"noise": args.noise, "pixels": args.pixel_corruption,
                   "occlusion": args.occlusion, "affine": args.affine}
    return {kind: value for kind, value in corruptions.items() if value}


def _run_compare(args):
    from keras_caps.evaluation import compare

    if args.partners_per_digit is not None:
        raise ValueError(
            "`--partners-per-digit` is a MultiMNIST option, and compare "
            "does not train on MultiMNIST. Received: --partners-per-digit="
            f"{args.partners_per_digit}")

    output_dir = args.output_dir or os.path.join(
        "runs", f"compare_{args.dataset}")
    results = compare(
        args.routers, args.dataset, output_dir=output_dir, seeds=args.seeds,
        epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
        batch_size=args.batch_size, data_dir=args.data_dir,
        validation=args.validation, reconstruction=args.reconstruction,
        corruptions=_corruptions(args),
        evaluation_seed=args.corruption_seed, isolation=args.isolation,
        verbose=0, download=args.download)
    with open(os.path.join(output_dir, "results.md")) as file:
        print(file.read())
    for router, row in results["routers"].items():
        print(f"{router}: {row['trainable_parameters']:,} trainable "
              "parameters")
    print(f"Wrote results.md, results.csv, results.json and "
          f"accuracy_vs_severity.png under {output_dir}")
    return 0


def _name_list(text):
    return [name.strip() for name in text.split(",") if name.strip()]


def _int_list(text):
    return _number_list(text, int, "integers")


def _float_list(text):
    return _number_list(text, float, "numbers")


def _number_list(text, convert, kind):
    try:
        return [convert(value) for value in _name_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated {kind}, received {text!r}") from None


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


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number, received {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected a positive number, received {text!r}")
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
