"""`keras-caps compare`: every router and the CNN baseline, one recipe,
several seeds, on clean and corrupted test data."""

import os

from keras_caps.cli.argument_types import int_list
from keras_caps.cli.argument_types import name_list
from keras_caps.cli.argument_types import positive_float
from keras_caps.cli.argument_types import positive_int
from keras_caps.cli.attack_arguments import add_attack_arguments
from keras_caps.cli.attack_arguments import check_attack_images_flag
from keras_caps.cli.attack_arguments import requested_attacks
from keras_caps.cli.shared_arguments import add_corruption_arguments
from keras_caps.cli.shared_arguments import add_data_arguments
from keras_caps.cli.shared_arguments import add_user_data_arguments
from keras_caps.cli.shared_arguments import add_viewpoints_argument
from keras_caps.cli.shared_arguments import dataset_name
from keras_caps.cli.shared_arguments import dataset_slug
from keras_caps.cli.shared_arguments import requested_corruptions
from keras_caps.cli.shared_arguments import user_data_options


def add_compare_command(commands):
    """Registers `compare` and its handler on the subparsers `commands`."""
    from keras_caps.compare.compared_models import comparable_models

    compare = commands.add_parser(
        "compare", help="Train CapsuleClassifier with each router (and the "
        "CNN baseline) for each seed under one recipe, evaluate them on "
        "clean and corrupted test data, and write a table (Markdown, CSV, "
        "JSON) and a plot. Resumable.")
    compare.add_argument("--routers", type=name_list,
                         default=None,
                         help="Comma-separated, among "
                         f"{','.join(comparable_models())}. Defaults to all "
                         "but sabour_cnn (and cnn_vectors_decoder with "
                         "--no-reconstruction).")
    compare.add_argument("--dataset", default="mnist", type=dataset_name,
                         help="mnist, fashion_mnist, smallnorb, "
                         "mnist_canvas (MNIST digits placed at random on a "
                         "40x40 canvas, generated, for --affine) or "
                         "multi_mnist (two overlapping digits, scored per "
                         "digit and by exact match; needs "
                         "--partners-per-digit); or your "
                         "own data: folder:PATH, npz:PATH or "
                         "tfds:NAME (clean accuracy only).")
    compare.add_argument("--seeds", type=int_list, default=[0, 1, 2, 3, 4],
                         help="Comma-separated seeds, one model per router "
                         "and seed. Defaults to 0,1,2,3,4 (one seed: no "
                         "interval and no across-seed test).")
    compare.add_argument("--reference", default=None,
                         help="The model every other one is tested against "
                         "on every column (paired t-test and sign-flip "
                         "test over seeds, Holm-corrected; McNemar per "
                         "seed pair). Defaults to the first of --routers.")
    _add_recipe_arguments(compare)
    _add_scale_out_arguments(compare)
    add_data_arguments(compare)
    add_user_data_arguments(compare, preset=True)
    compare.add_argument("--output-dir", default=None,
                         help="Defaults to runs/compare_<dataset>.")
    add_corruption_arguments(compare)
    add_viewpoints_argument(compare, "each model's accuracy")
    add_attack_arguments(compare)
    _add_normalization_arguments(compare)
    compare.set_defaults(handler=run_compare, on_interrupt=_interrupted)


def _add_normalization_arguments(compare):
    compare.add_argument("--adapt-batchnorm", action="store_true",
                         help="Also evaluate every model with its BatchNorm "
                         "statistics re-estimated on each (corrupted) test "
                         "set: test-time adaptation; models are not "
                         "changed or retrained.")
    compare.add_argument("--stem-normalization", default="batch",
                         choices=("batch", "group"),
                         help="The stem's normalisation: batch (default) "
                         "or group (GroupNorm, 8 channels per group, no "
                         "batch statistics).")
    compare.add_argument("--equivalence-margin", type=positive_float,
                         default=None, metavar="POINTS",
                         help="The largest accuracy difference from the "
                         "reference, in points (0.5 = half a point), that "
                         "counts as no difference; fix it before the "
                         "comparison runs. results.md then tests every "
                         "model and column for equivalence (two one-sided "
                         "t-tests, Holm-corrected) and marks it with ≈. "
                         "Recorded in compare.json; it changes no model.")


def _add_recipe_arguments(compare):
    compare.add_argument("--epochs", type=positive_int, default=None,
                         help="Defaults to the preset's (150).")
    compare.add_argument("--steps-per-epoch", type=positive_int,
                         default=None,
                         help="Limit each epoch to this many steps.")
    compare.add_argument("--batch-size", type=positive_int, default=None,
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


def _add_scale_out_arguments(compare):
    from keras_caps.cli.train_command import add_until_accuracy_argument

    add_until_accuracy_argument(compare, what="each model")
    compare.add_argument("--workers", type=positive_int, default=1,
                         help="Train this many models at once, each in its "
                         "own process on an equal share of the cores "
                         "(default 1).")
    compare.add_argument("--shard", default=None, metavar="K/N",
                         help="Train only the K-th of N shares of the "
                         "(model, seed) list, for a job array filling one "
                         "--output-dir on a shared file system; the table "
                         "is written by the share that finishes last (or "
                         "rerun without --shard).")


def run_compare(args):
    """Runs the comparison and prints its table. Returns 0."""
    from keras_caps.compare import compare

    output_dir = _output_dir(args)
    settings = _settings(args)
    results = compare(
        settings, output_dir=output_dir, data_dir=args.data_dir,
        download=args.download, read_options=user_data_options(args),
        reference=args.reference, isolation=args.isolation,
        workers=args.workers, shard=args.shard, verbose=0)
    if "unfinished" in results:
        _print_unfinished(results, args, output_dir)
        return 0
    with open(os.path.join(output_dir, "results.md")) as file:
        print(file.read())
    for router, row in results["routers"].items():
        print(f"{router}: {row['trainable_parameters']:,} trainable "
              "parameters")
    print(f"Wrote results.md, results.csv, results.json, "
          f"accuracy_vs_severity.png and learning_curves.png under "
          f"{output_dir}")
    if settings.attacks:
        print(f"Wrote accuracy_vs_epsilon.png under {output_dir}")
    return 0


def _settings(args):
    """The `ComparisonSettings` the command line asks for."""
    from keras_caps.compare import ComparisonSettings

    attacks = requested_attacks(args)
    check_attack_images_flag(attacks, args.dataset)
    return ComparisonSettings(
        args.routers, args.dataset, seeds=args.seeds, epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch, batch_size=args.batch_size,
        validation=args.validation, reconstruction=args.reconstruction,
        corruptions=requested_corruptions(args),
        evaluation_seed=args.corruption_seed, preset=args.preset,
        until_accuracy=args.until_accuracy,
        viewpoints=args.viewpoints, partners_per_digit=args.partners_per_digit,
        adapt_batchnorm=args.adapt_batchnorm,
        stem_normalization=args.stem_normalization, attacks=attacks,
        equivalence_margin=(None if args.equivalence_margin is None
                            else args.equivalence_margin / 100))


def _print_unfinished(results, args, output_dir):
    """What a share that finished before the others prints."""
    unfinished = results["unfinished"]
    done = len(results["models"])
    mine = (f"Share {args.shard} is finished" if args.shard
            else "This command's models are finished")
    print(f"{mine}: {done} of {done + len(unfinished)} models of the "
          f"comparison in {output_dir} are; still to finish: "
          f"{', '.join(unfinished)}. The table will be written by the share "
          "that finishes last, or by rerunning this command without "
          "--shard once every share has finished.")


def _output_dir(args):
    return args.output_dir or os.path.join(
        "runs", f"compare_{dataset_slug(args.dataset)}")


def _interrupted(args):
    """What Ctrl-C left (`keras_caps.cli.main` prints it): the finished
    models, the backup of a model interrupted while training (if it made
    one), and how to resume."""
    models = os.path.join(_output_dir(args), "models")
    try:
        names = sorted(os.listdir(models))
    except OSError:  # No model started.
        names = []
    finished, backed_up = 0, []
    for name in names:
        if os.path.exists(os.path.join(models, name, "metrics.json")):
            finished += 1
        elif _holds_files(os.path.join(models, name, "backup")):
            backed_up.append(name)
    kept = f"{finished} trained model(s)"
    if backed_up:
        kept += (f" and the last backup of the interrupted "
                 f"{', '.join(backed_up)}")
    return (f"{kept} are kept in {models!r}; run the same command again to "
            "resume.")


def _holds_files(folder):
    try:
        with os.scandir(folder) as entries:
            return any(True for _ in entries)
    except OSError:  # None made yet.
        return False
