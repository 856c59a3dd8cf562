"""`keras-caps train`: train, select, test, save and export one model."""

import argparse
import json
import os

from keras_caps.cli.argument_types import positive_float
from keras_caps.cli.argument_types import positive_int
from keras_caps.cli.shared_arguments import add_data_arguments
from keras_caps.cli.shared_arguments import add_user_data_arguments
from keras_caps.cli.shared_arguments import add_viewpoints_argument
from keras_caps.cli.shared_arguments import dataset_help
from keras_caps.cli.shared_arguments import dataset_name
from keras_caps.cli.shared_arguments import dataset_options
from keras_caps.cli.shared_arguments import dataset_slug
from keras_caps.cli.shared_arguments import model_help
from keras_caps.cli.shared_arguments import model_name
from keras_caps.cli.shared_arguments import user_data_options


def add_train_command(commands):
    """Registers `train` and its handler on the subparsers `commands`."""
    train = commands.add_parser(
        "train", help="Train a model, select it on validation data, test "
        "it, save it and export it.")
    _add_recipe_arguments(train)
    add_data_arguments(train)
    add_user_data_arguments(train, preset=True)
    train.add_argument("--augment", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="Your own data: shift each training image by "
                       "up to 10%% at random. Default: as the preset's "
                       "recipe (on for CapsNet, off for the others).")
    _add_run_arguments(train)
    _add_temperature_arguments(train)
    add_until_accuracy_argument(train)
    train.add_argument("--stem-normalization", default=None,
                       choices=("batch", "group"),
                       help="The convolutional stem's normalisation, for "
                       "the models that have the option (the routers' "
                       "models and the controls but sabour_cnn): batch "
                       "(the default) or group (GroupNorm, no batch "
                       "statistics).")
    add_viewpoints_argument(train, "the test metrics")
    train.set_defaults(handler=run_train, on_interrupt=_describe_interrupted)


def _add_recipe_arguments(train):
    from keras_caps.training import PRECISIONS
    from keras_caps.training import STRATEGIES

    train.add_argument("--model", default="efficient_capsnet",
                       type=model_name, metavar="MODEL",
                       help=model_help())
    train.add_argument("--dataset", default="mnist", type=dataset_name,
                       help=dataset_help())
    train.add_argument("--epochs", type=positive_int, default=None,
                       help="Defaults to the model preset's (150 for "
                       "EfficientCapsNet).")
    train.add_argument("--batch-size", type=positive_int, default=None,
                       help="Global batch size. Defaults to the model "
                       "preset's (16 for EfficientCapsNet).")
    train.add_argument("--steps-per-epoch", type=positive_int, default=None,
                       help="Limit each epoch to this many steps.")
    train.add_argument("--precision", default="float32", choices=PRECISIONS,
                       help="mixed_float16 is for NVIDIA GPUs: CPUs compute "
                       "float16 convolution gradients many times slower, "
                       "and it warns there. mixed_bfloat16 "
                       "is faster than float32 on CPUs with AVX-512 and on "
                       "TPUs.")
    train.add_argument("--strategy", default="auto", choices=STRATEGIES,
                       help="auto: a TPU, else several GPUs, else one "
                       "device. On JAX, mirrored (and auto with several "
                       "devices) is keras.distribution.DataParallel; "
                       "multi_worker and tpu are TensorFlow's, and PyTorch "
                       "trains on one device.")


def _add_run_arguments(train):
    train.add_argument("--output-dir", default=None,
                       help="Defaults to runs/<model>_<dataset> (your own "
                       "data: the folder's, file's or TFDS dataset's "
                       "name).")
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
                       help="Deterministic kernels: TensorFlow's op "
                       "determinism, PyTorch's deterministic algorithms, "
                       "XLA's deterministic GPU ops on JAX.")
    train.add_argument("--backup-frequency", type=positive_int, default=500,
                       help="Steps between crash-recovery backups within "
                       "an epoch (one is also written at each epoch's "
                       "end).")
    train.add_argument("--steps-per-execution", type=positive_int,
                       default=1, metavar="N",
                       help="Optimizer steps per call of the compiled "
                       "training step (Keras' steps_per_execution): on a "
                       "GPU at batch 16 the host's work per step otherwise "
                       "dominates. The same training as 1; backups land at "
                       "the end of a call. JAX and TensorFlow; not with "
                       "--routing-temperature; must divide "
                       "--steps-per-epoch. Default 1.")
    train.add_argument("--input-workers", type=positive_int, default=None,
                       metavar="K",
                       help="Threads making batches in the NumPy input "
                       "pipeline (mnist, fashion_mnist, multi_mnist on JAX "
                       "or PyTorch, or without TensorFlow); the batches "
                       "do not depend on it. Default: 1, in the training "
                       "thread.")
    train.add_argument("--fresh", action="store_true",
                       help="Delete what an earlier run wrote in "
                       "--output-dir (its run.json, backup/, checkpoints/, "
                       "history.csv, logs/, model.keras, keras-caps "
                       "export/ and metrics.json; nothing else) and train "
                       "from scratch. Without it, a folder made with other "
                       "settings is refused and one with the same settings "
                       "is resumed.")
    train.add_argument("--worker-timeout", type=positive_float,
                       default=600.0, metavar="SECONDS",
                       help="multi_worker: how long to wait for the other "
                       "workers to start, and then for TensorFlow's start-up "
                       "of the cluster, before giving up with a line naming "
                       "the workers that do not answer (default 600).")


def _add_temperature_arguments(train):
    train.add_argument("--routing-temperature", type=float, default=None,
                       help="Anneal the routing temperature of every router "
                       "from this value (tau_0); logged per epoch.")
    train.add_argument("--temperature-decay", type=float, default=0.0,
                       help="Decay per step: tau_t = max(tau_min, tau_0 "
                       "exp(-decay t)). Default: 0 (constant).")
    train.add_argument("--min-temperature", type=float, default=None,
                       help="The floor tau_min. Default: min(1, tau_0).")


def add_until_accuracy_argument(parser, what="the model"):
    """`--until-accuracy A` (of `train` and `compare`)."""
    parser.add_argument(
        "--until-accuracy", type=float, default=None, metavar="A",
        help=f"Train {what} until the validation accuracy (holdout, checked "
        "at each epoch's end) reaches A, in (0, 1), at most --epochs; the "
        "selected model is the first epoch that reached it, and the record "
        "says whether and where it was reached (Sabour et al. 2017, "
        "section 5.2: models compared at matched clean accuracy). Not with "
        "--validation test.")


def run_train(args):
    """Trains as the flags say; prints the metrics record. Returns 0."""
    from keras_caps import training

    output_dir = _output_dir(args)
    options = dataset_options(args)
    if args.augment is not None:
        from keras_caps.datasets.user_data.user_dataset import is_user_dataset

        if not is_user_dataset(args.dataset):
            raise ValueError(
                "--augment and --no-augment apply to your own data "
                "(folder:, npz:, tfds:); the recipe of "
                f"{args.dataset!r} is fixed. Received: --dataset "
                f"{args.dataset}")
        options["augment"] = args.augment
    if args.viewpoints is not None:
        options["viewpoints"] = args.viewpoints
    record = training.train(
        args.model, args.dataset, output_dir=output_dir,
        epochs=args.epochs, batch_size=args.batch_size,
        precision=args.precision, strategy=args.strategy,
        data_dir=args.data_dir, seed=args.seed,
        validation=args.validation, reconstruction=args.reconstruction,
        deterministic=args.deterministic,
        steps_per_epoch=args.steps_per_epoch,
        backup_frequency=args.backup_frequency,
        dataset_options=options, fresh=args.fresh, preset=args.preset,
        worker_timeout=args.worker_timeout,
        routing_temperature=args.routing_temperature,
        temperature_decay=args.temperature_decay,
        min_temperature=args.min_temperature, download=args.download,
        until_accuracy=args.until_accuracy,
        stem_normalization=args.stem_normalization,
        steps_per_execution=args.steps_per_execution,
        input_workers=args.input_workers,
        **user_data_options(args))
    print(json.dumps(record, indent=2, sort_keys=True))
    if record.get("export_skipped"):
        print(f"Saved model and metrics under {output_dir} (export "
              f"skipped: {record['export_skipped']})")
    else:
        print(f"Saved model, export and metrics under {output_dir}")
    return 0


def _output_dir(args):
    return args.output_dir or os.path.join(
        "runs", f"{args.model}_{dataset_slug(args.dataset)}")


def _describe_interrupted(args):
    """What an interrupted `train` kept (its backup and best checkpoint so
    far) and how to resume: the line `keras-caps` prints after Ctrl-C."""
    output_dir = _output_dir(args)
    kept = []
    backup = os.path.join(output_dir, "backup")
    if os.path.isdir(backup) and os.listdir(backup):
        kept.append(f"the training so far in {backup!r}")
    best = os.path.join(output_dir, "checkpoints", "best.keras")
    if os.path.exists(best):
        kept.append(f"the best model so far in {best!r}")
    record_path = os.path.join(output_dir, "run.json")
    if not os.path.exists(record_path):
        return "nothing was saved."
    if _is_complete(record_path):
        return f"the run in {output_dir!r} was already complete; it is intact."
    if not kept:
        return (f"no training was saved yet in {output_dir!r}; rerun the "
                "same command to start it again.")
    return (f"kept {' and '.join(kept)}. Rerun the same command to resume "
            "where it stopped.")


def _is_complete(record_path):
    from keras_caps.runs.record_files import read_json_record

    try:
        progress = read_json_record(record_path).get("progress", {})
    except (OSError, ValueError):
        return False
    return isinstance(progress, dict) and bool(progress.get("complete"))
