"""Flags that several `keras-caps` commands share, and what they mean."""

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


def add_corruption_arguments(parser):
    """`--noise`, `--pixel-corruption`, `--occlusion`, `--affine` and
    `--corruption-seed`."""
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
                        "translated on a 40x40 canvas); for models trained "
                        "on --dataset mnist_canvas.")
    parser.add_argument("--corruption-seed", type=int, default=1234,
                        help="Seeds the corruptions (the same images for "
                        "every model).")


def requested_corruptions(args):
    """The corruption flags given, as `keras_caps.evaluation` takes them:
    e.g. `{"noise": [0.1, 0.2], "affine": True}`."""
    corruptions = {"noise": args.noise, "pixels": args.pixel_corruption,
                   "occlusion": args.occlusion, "affine": args.affine}
    return {kind: value for kind, value in corruptions.items() if value}
