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

Each subcommand lives in a module of its own (`train_command`, ...), whose
`add_<name>_command` registers the subcommand's flags together with its
handler (`set_defaults(handler=...)`): `main` runs `args.handler(args)`,
so a subcommand cannot exist without the code that runs it.
"""

import argparse
import logging
import os
import sys

from keras_caps.cli.compare_command import add_compare_command
from keras_caps.cli.evaluate_command import add_evaluate_command
from keras_caps.cli.export_command import add_export_command
from keras_caps.cli.plot_command import add_plot_command
from keras_caps.cli.predict_command import add_predict_command
from keras_caps.cli.train_command import add_train_command
from keras_caps.jax_gc_callback import remove_unused_jax_gc_callback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_parser():
    """The `keras-caps` argument parser, one subparser per command.

    Example:

    ```python
    args = build_parser().parse_args(["export", "--model-path", "m.keras",
                                      "--export-dir", "exported"])
    args.handler(args)  # What `main` runs.
    ```
    """
    parser = argparse.ArgumentParser(
        prog="keras-caps",
        description="Train, evaluate and export capsule networks.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_train_command(commands)
    add_evaluate_command(commands)
    add_export_command(commands)
    add_plot_command(commands)
    add_compare_command(commands)
    add_predict_command(commands)
    return parser


def main(argv=None):
    """Runs `keras-caps` with `argv` (default: the command line).

    Returns the exit status: 0 on success, 2 for bad arguments or data
    (one line on stderr), 1 when the environment fails (a folder in use, a
    full or read-only disk, a corrupt data file, a worker of a
    multi-worker run that died, memory exhausted), 130 after Ctrl-C (one
    line saying what was kept: a subcommand that saves progress registers
    `set_defaults(on_interrupt=describe)`, `describe(args)` returning that
    text, which the environment failures repeat).

    Example:

    ```python
    status = main(["evaluate", "--model-path", "runs/x/model.keras"])
    ```
    """
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    remove_unused_jax_gc_callback()
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        describe = getattr(args, "on_interrupt", None)
        kept = describe(args) if describe else "nothing was saved."
        print(f"keras-caps {args.command}: interrupted: {kept}",
              file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as error:
        print(f"keras-caps {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as error:
        # The environment, not the arguments: a folder in use (run.lock),
        # workers that never started, a full or read-only disk.
        from keras_caps.runs.run_lock import FolderInUseError

        if isinstance(error, RuntimeError) and not isinstance(
                error, FolderInUseError):
            raise
        print(f"keras-caps {args.command}: error: {_one_line(error)}",
              file=sys.stderr)
        return 1
    except Exception as error:
        runtime_failure = _runtime_failure(error)
        if runtime_failure is None:
            raise
        describe = getattr(args, "on_interrupt", None)
        kept = f" {describe(args)}" if describe else ""
        print(f"keras-caps {args.command}: error: {runtime_failure}{kept}",
              file=sys.stderr)
        return 1


def _runtime_failure(error):
    """`describe_runtime_failure(error)`, without importing TensorFlow
    (which `keras_caps.training` imports) when it was not imported: the
    error cannot be TensorFlow's then."""
    if "tensorflow" not in sys.modules:
        return None
    from keras_caps.training.runtime_failures import describe_runtime_failure

    return describe_runtime_failure(error)


def _one_line(error):
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.strerror}: {error.filename!r}"
    return " ".join(str(error).split())
