"""`keras-caps plot`: a figure of a saved model or a training log."""

import sys

from keras_caps.cli.argument_types import non_negative_int
from keras_caps.cli.argument_types import positive_int
from keras_caps.cli.shared_arguments import add_data_arguments
from keras_caps.cli.shared_arguments import dataset_options


def add_plot_command(commands):
    """Registers `plot` and its handler on the subparsers `commands`."""
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
    add_data_arguments(plot)
    _add_figure_arguments(plot)
    plot.set_defaults(handler=run_plot)


def _add_figure_arguments(plot):
    plot.add_argument("--num-images", type=positive_int, default=10,
                      help="reconstructions, credit: how many test images.")
    plot.add_argument("--index", type=non_negative_int, default=0,
                      help="perturbation, routing: which test image.")
    plot.add_argument("--class-index", type=non_negative_int, default=None,
                      help="perturbation, credit: the class. Defaults to "
                      "the predicted one.")
    plot.add_argument("--layer", dest="layers", action="append",
                      default=None,
                      help="routing: a routing layer to draw (repeatable). "
                      "Defaults to all.")
    plot.add_argument("--output", default=None,
                      help="The PNG file. Defaults to <kind>.png. An "
                      "existing file is replaced only if an earlier "
                      "`keras-caps plot` wrote it.")
    plot.add_argument("--dpi", type=positive_int, default=100)


def run_plot(args):
    """Draws the figure. Returns 0, or 2 without matplotlib."""
    from keras_caps.runs.output_files import check_output_path
    from keras_caps.visualization import plot_to_file
    from keras_caps.visualization.plot_files import PLOT_MARK

    output = args.output or f"{args.kind}.png"
    # As `plot_to_file` does, with the message naming the option.
    check_output_path(output, PLOT_MARK, "--output")
    try:
        plot_to_file(
            args.kind, output, model_path=args.model_path,
            log_path=args.log, dataset=args.dataset,
            data_dir=args.data_dir, num_images=args.num_images,
            index=args.index, class_index=args.class_index,
            layer_names=args.layers, dpi=args.dpi,
            dataset_options=dataset_options(args), download=args.download)
    except ImportError as error:  # matplotlib is an optional extra.
        print(f"keras-caps plot: error: {error}", file=sys.stderr)
        return 2
    print(f"Wrote {output}")
    return 0
