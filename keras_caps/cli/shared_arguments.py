"""Flags that several `keras-caps` commands share, and what they mean."""

import argparse
import os
import re

from keras_caps.cli.argument_types import float_list
from keras_caps.cli.argument_types import int_list
from keras_caps.cli.argument_types import positive_int


def add_data_arguments(parser):
    """`--data-dir`, `--no-download` and `--partners-per-digit`."""
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
    parser.add_argument("--partners-per-digit", type=positive_int,
                        default=None,
                        help="MultiMNIST test partners per digit (1000).")


def dataset_options(args):
    """The loader options of the data flags: `{"partners_per_digit": n}`
    when `--partners-per-digit` is given, else `{}`."""
    options = {}
    if getattr(args, "partners_per_digit", None) is not None:
        options["partners_per_digit"] = args.partners_per_digit
    return options


def add_viewpoints_argument(parser, reports):
    """`--viewpoints azimuth|elevation` (of `train` and `compare`):
    smallNORB's novel-viewpoint splits; `reports` says what is reported."""
    parser.add_argument(
        "--viewpoints", default=None, choices=("azimuth", "elevation"),
        help="smallnorb only: train on the familiar viewpoints of Hinton "
        "et al. 2018, section 5.1 (azimuths 300-40 degrees, or the three "
        "lowest elevations 30-40 degrees), select on a holdout of them, "
        f"and report {reports} on the test images (other object "
        "instances) seen from the familiar and from the novel viewpoints.")


def add_corruption_arguments(parser):
    """`--noise`, `--pixel-corruption`, `--occlusion`, `--affine`,
    `--affnist-dir`, `--translated` and `--corruption-seed`."""
    parser.add_argument("--noise", type=float_list, default=None,
                        help="Gaussian noise standard deviations, fractions "
                        "of the pixel range in [0, 1], comma-separated.")
    parser.add_argument("--pixel-corruption", type=float_list,
                        default=None,
                        help="Fractions of pixels replaced by uniform noise, "
                        "in [0, 1], comma-separated.")
    parser.add_argument("--occlusion", type=int_list, default=None,
                        help="Sides in pixels of a randomly placed blanked "
                        "square, comma-separated.")
    parser.add_argument("--affine", action="store_true",
                        help="The generated affNIST-style test set (MNIST "
                        "test digits rotated, sheared, scaled and "
                        "translated on a 40x40 canvas; affNIST's own "
                        "files with --affnist-dir); for models trained "
                        "on --dataset mnist_canvas.")
    parser.add_argument("--affnist-dir", default=None,
                        help="With --affine: the folder of affNIST's "
                        "transformed test set (test_batches/1.mat .. "
                        "32.mat, or test.mat; Tieleman 2013): the affine "
                        "column reads these 320,000 images instead of "
                        "generating its set.")
    parser.add_argument("--translated", action="store_true",
                        help="Also classify the clean canvas test images "
                        "with each digit moved to a random position "
                        "(nothing else changed); for --dataset "
                        "mnist_canvas.")
    parser.add_argument("--corruption-seed", type=int, default=1234,
                        help="Seeds the corruptions (the same images for "
                        "every model).")


def requested_corruptions(args):
    """The corruption flags given, as `keras_caps.evaluation` takes them:
    e.g. `{"noise": [0.1, 0.2], "affine": True}`."""
    corruptions = {"noise": args.noise, "pixels": args.pixel_corruption,
                   "occlusion": args.occlusion, "affine": args.affine,
                   "affnist_dir": args.affnist_dir,
                   "translated": args.translated}
    return {kind: value for kind, value in corruptions.items() if value}


def model_name(text):
    """The `--model` converter: a name of `keras_caps.applications.MODELS`
    (a name used before 0.2.0 is refused, naming the new one)."""
    from keras_caps.applications import MODELS
    from keras_caps.applications import renamed_model

    if text in MODELS:
        return text
    renamed = renamed_model(text)
    since = "" if renamed is None else (
        f"; it is named {renamed!r} since 0.2.0")
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r}{since} (choose from "
        f"{', '.join(MODELS)})")


def model_help():
    """`--model`'s help: the registered names by kind."""
    from keras_caps.applications import MODELS

    def names(kind):
        return ", ".join(name for name, entry in MODELS.items()
                         if entry.kind == kind)

    return (f"The papers' models: {names('paper')}. CapsuleClassifier with "
            f"one router: {names('router')}. The controls of `compare`: "
            f"{names('control')}. Defaults to efficient_capsnet.")


def dataset_name(text):
    """The `--dataset` converter: a built-in dataset's name, or a dataset a
    user brings (`folder:PATH`, `npz:PATH`, `tfds:NAME`)."""
    from keras_caps.datasets import DATASETS
    from keras_caps.datasets.user_data.user_dataset import is_user_dataset

    if text in DATASETS or is_user_dataset(text):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from "
        f"{', '.join(sorted(DATASETS))}, or your own data: folder:PATH, "
        "npz:PATH or tfds:NAME)")


DATASET_HELP = (
    "A built-in dataset ({names}), or your own: folder:PATH (a folder of "
    "class "
    "subfolders of PNG, JPEG, BMP or GIF images), npz:PATH (x_train, "
    "y_train, x_test, y_test) or tfds:NAME[:VERSION] (a TFDS image "
    "classification dataset).")


def dataset_help(extra=""):
    """`--dataset`'s help: `DATASET_HELP` with the built-in names."""
    from keras_caps.datasets import DATASETS

    return DATASET_HELP.format(names=", ".join(sorted(DATASETS))) + extra


def image_size(text):
    """`--image-size`: `"28"` -> `(28, 28)`, `"32,24"` -> `(32, 24)`
    (height, width)."""
    sizes = text.replace("x", ",").split(",")
    try:
        values = [int(size) for size in sizes]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 1:
        raise argparse.ArgumentTypeError(
            "expected a positive size (28) or HEIGHT,WIDTH (32,24), "
            f"received {text!r}")
    return (values[0], values[-1])


def add_user_data_arguments(parser, preset=False):
    """`--image-size`, `--color-mode`, `--test-dir`, `--test-share` (and,
    with `preset=True`, `--preset`): how a dataset a user brings is read."""
    from keras_caps.datasets import DATASETS

    group = parser.add_argument_group(
        "your own data (--dataset folder:PATH, npz:PATH or tfds:NAME)")
    group.add_argument("--image-size", type=image_size, default=None,
                       metavar="SIZE", help="Resize every image: 28 or "
                       "HEIGHT,WIDTH. Default: the images' own size (a "
                       "folder's images must then share one).")
    group.add_argument("--color-mode", default=None,
                       choices=("grayscale", "rgb"),
                       help="Default: grayscale when every image is, else "
                       "rgb (arrays and TFDS: as stored).")
    group.add_argument("--test-dir", default=None,
                       help="folder: a second folder of the same class "
                       "subfolders holding the test images.")
    group.add_argument("--test-share", type=float, default=None,
                       help="folder: without --test-dir, the share of each "
                       "class held out (seeded) as test images (0.2).")
    if preset:
        group.add_argument("--preset", default=None,
                           choices=sorted(DATASETS),
                           help="The model preset (architecture and "
                           "training recipe) of this built-in dataset. "
                           "Default: the closest to your images among the "
                           "model's presets: the same number of channels "
                           "if any has it, then the nearest image area "
                           "(height x width); a tie goes to the first "
                           "preset listed.")


def user_data_options(args):
    """The read options of `add_user_data_arguments`' flags, as
    `keras_caps.training.train` and `evaluate` take them."""
    return {"image_size": args.image_size, "color_mode": args.color_mode,
            "test_dir": args.test_dir, "test_share": args.test_share}


def dataset_slug(dataset):
    """A folder-name form of `--dataset`: `mnist`, or for `folder:~/cats`
    `cats` (the last part of a path; TFDS: the name)."""
    from keras_caps.datasets.user_data.user_dataset import is_user_dataset

    if not is_user_dataset(dataset):
        return dataset
    kind, _, location = dataset.partition(":")
    if kind == "tfds":
        name = location.split(":")[0]
    else:
        path = os.path.normpath(os.path.expanduser(location))
        name = os.path.splitext(os.path.basename(path))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or kind
