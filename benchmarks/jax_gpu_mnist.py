"""The one-window GPU recipe: Efficient-CapsNet on MNIST on JAX, no TensorFlow.

One command trains Efficient-CapsNet on MNIST with the paper's recipe (the
official augmentation: rotation, shift, squish, erase; batch 16; the
preset's exponentially decaying learning rate; 150 epochs), selects the
epoch with the best accuracy on the 6,000 held-out training images, tests
that model once on the 10,000 test images, and writes `metrics.json`,
within one short GPU slot. It is a thin layer over
`keras_caps.training.train` (the recipe of `keras-caps train`: run
records, best checkpoint, resume, export): on the JAX backend, whose
input is the TensorFlow-free NumPy pipeline, with

- `--steps-per-execution` steps per host dispatch (default 64): at batch
  16 an epoch is 3,375 steps, and the host's work per step would
  otherwise dominate a GPU step;
- `--input-workers` threads making augmented batches (default 8; see the
  README, "One-window GPU recipe", for the images/s one thread makes);
- `--time-budget-minutes` of training (default 8): training stops after
  the epoch in which it ran out, and `metrics.json`'s `time_budget` and
  `epochs_trained` say so (the line printed at the end too: "stopped
  after epoch E of 150"), so a shorter run is never labelled as the full
  recipe.

Each epoch prints a line with its images/s, the time elapsed and the time
left. `metrics.json` (in `--output-dir`) holds the protocol, the loader
options (the augmentation), the epochs trained, the selected epoch and
its holdout accuracy, the test metrics, the budget, the hardware and the
versions. Rerunning the same command resumes a run that was killed, and
does nothing for a finished one (`--fresh` starts over).

`--dry-run` checks the command on a CPU in a minute: 2 epochs of 8 steps
(4 a call, one input thread), with validation and test on the full
splits, into `--output-dir` (default `runs/jax_gpu_mnist_dry_run`).

Usage:

    python benchmarks/jax_gpu_mnist.py --data-dir DATA/mnist
    python benchmarks/jax_gpu_mnist.py --data-dir DATA/mnist --dry-run
"""

import argparse
import logging
import os
import sys
import time

_DRY_RUN = {"epochs": 2, "steps_per_epoch": 8, "steps_per_execution": 4,
            "input_workers": None}
# The loader options of the paper's recipe, recorded in `metrics.json`.
_AUGMENTATION = {"augment": True, "augmentation": "efficient_capsnet"}


def _parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir",
                        default=os.environ.get("KERAS_CAPS_DATA_DIR"),
                        help="Folder of the four MNIST IDX files (default: "
                        "$KERAS_CAPS_DATA_DIR).")
    parser.add_argument("--output-dir", default=None,
                        help="Default: runs/jax_gpu_mnist (with --dry-run: "
                        "runs/jax_gpu_mnist_dry_run).")
    parser.add_argument("--steps-per-execution", type=int, default=64)
    parser.add_argument("--input-workers", type=int, default=8)
    parser.add_argument("--time-budget-minutes", type=float, default=8.0,
                        help="Minutes of training; it stops after the epoch "
                        "in which they ran out (default 8, for a 10-minute "
                        "slot: start-up, testing and export take the rest).")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--fresh", action="store_true",
                        help="Delete an earlier run in --output-dir first.")
    parser.add_argument("--dry-run", action="store_true",
                        help="2 epochs of 8 steps on the CPU.")
    return parser


def _options(args):
    """`keras_caps.training.train`'s arguments for these flags."""
    options = {
        "output_dir": args.output_dir or os.path.join(
            "runs", "jax_gpu_mnist_dry_run" if args.dry_run
            else "jax_gpu_mnist"),
        "data_dir": args.data_dir, "seed": args.seed, "fresh": args.fresh,
        "validation": "holdout", "dataset_options": dict(_AUGMENTATION),
        "steps_per_execution": args.steps_per_execution,
        "input_workers": args.input_workers,
        "time_budget": 60.0 * args.time_budget_minutes, "verbose": 2,
    }
    if args.dry_run:
        options.update(_DRY_RUN)
    return options


def _summary(record, seconds):
    """The line printed at the end: what ran, what it scored, where."""
    budget = record.get("time_budget") or {}
    trained, epochs = record["epochs_trained"], record["epochs"]
    if budget.get("ran_out"):
        ran = (f"stopped after epoch {trained} of {epochs}: the "
               f"{budget['seconds'] / 60:g}-minute time budget ran out")
    else:
        ran = f"trained all {trained} of {epochs} epochs"
    test = record["test"]
    accuracy = test.get("length_accuracy", test.get("accuracy"))
    return (
        f"Efficient-CapsNet on MNIST ({record['protocol']}; augmentation "
        f"{record['dataset_options'].get('augmentation')}) on "
        f"{record['hardware']}, {record['backend']}: {ran}; selected "
        f"epoch {record['selected_epoch']} (holdout accuracy "
        f"{record['best_validation']:.4f}); test error "
        f"{100 * (1 - accuracy):.2f} %; {seconds:.0f} s in all.")


def main(argv=None):
    args = _parser().parse_args(argv)
    if not args.data_dir:
        _parser().error("pass --data-dir (or set KERAS_CAPS_DATA_DIR)")
    os.environ["KERAS_BACKEND"] = "jax"
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.monotonic()
    import keras

    if keras.backend.backend() != "jax":
        sys.exit("This recipe runs on JAX: import nothing that loads Keras "
                 "before it (KERAS_BACKEND is set to jax here).")
    from keras_caps.training import train

    record = train("efficient_capsnet", "mnist", **_options(args))
    print(_summary(record, time.monotonic() - start), flush=True)
    return record


if __name__ == "__main__":
    main()
