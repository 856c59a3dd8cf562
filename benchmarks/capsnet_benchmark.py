"""Training speed of CapsNet-MNIST (`keras_caps.applications.CapsNet`).

Usage:

    python benchmarks/capsnet_benchmark.py [--rounds 2] [--steps 12]
        [--batch_sizes 16 64] [--precisions float32 mixed_bfloat16]

Every measurement runs `model.fit` on one repeated synthetic MNIST batch in
its own subprocess (so peak memory is that configuration's own), with the
full model: reconstruction decoder, margin + reconstruction loss, Adam.
Reported numbers are medians over rounds of the median step time of the
timed steps, after the first third of the steps (at least 2) is discarded
as warm-up (tracing, allocator growth).

The arithmetic of one training step is about 1.2 GFLOP per image (the
forward pass is ~0.4 GFLOP, 95 % of it the 9x9 primary-capsule
convolution of 256 -> 256 channels; the backward pass ~2x that); the
table prints the throughput this implies.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

TRAIN_GFLOP_PER_IMAGE = 1.2


def _worker(precision, batch_size, steps):
    """Runs one measurement; prints one JSON line."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_caps.applications import CapsNet

    keras.config.set_dtype_policy(precision)
    model = CapsNet("mnist")
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size, 28, 28, 1)).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10, batch_size)]
    data = tf.data.Dataset.from_tensors(
        ({"image": images, "label": labels},
         {"length": labels, "reconstruction": images / 255})).repeat()
    times = []

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0,
              callbacks=[StepTimer()])
    warmup = max(2, steps // 3)
    step_seconds = statistics.median(times[warmup:])
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"step_ms": 1000 * step_seconds,
                      "images_per_second": batch_size / step_seconds,
                      "peak_mib": peak_mib}))


def _measure(precision, batch_size, steps):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, __file__, "--worker", precision, str(batch_size),
         str(steps)],
        capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _describe_machine():
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return f"{len(gpus)} GPU(s)"
    return f"{os.cpu_count()} CPU cores"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch_sizes", type=int, nargs="+",
                        default=[16, 64])
    parser.add_argument("--precisions", nargs="+", default=["float32"],
                        choices=["float32", "mixed_float16",
                                 "mixed_bfloat16"])
    parser.add_argument("--worker", nargs=3, default=None,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        precision, batch_size, steps = args.worker
        _worker(precision, int(batch_size), int(steps))
        return

    results = {}
    for round_index in range(args.rounds):
        order = (args.precisions if round_index % 2 == 0
                 else args.precisions[::-1])
        for batch_size in args.batch_sizes:
            for precision in order:
                results.setdefault((precision, batch_size), []).append(
                    _measure(precision, batch_size, args.steps))

    def median(key, field):
        return statistics.median(r[field] for r in results[key])

    print(f"CapsNet-MNIST training (8,215,728 parameters, 3 routing "
          f"iterations, with decoder), {_describe_machine()}, medians of "
          f"{args.rounds} rounds x {args.steps} steps (first third "
          "discarded as warm-up)\n")
    header = (f"{'precision':<16}{'batch':>6}{'step ms':>10}"
              f"{'images/s':>10}{'GFLOP/s':>9}{'peak MiB':>10}")
    print(header)
    print("-" * len(header))
    for batch_size in args.batch_sizes:
        for precision in args.precisions:
            key = (precision, batch_size)
            step_ms = median(key, "step_ms")
            images_per_second = 1000 * batch_size / step_ms
            print(f"{precision:<16}{batch_size:>6}{step_ms:>10.1f}"
                  f"{images_per_second:>10.1f}"
                  f"{images_per_second * TRAIN_GFLOP_PER_IMAGE:>9.0f}"
                  f"{median(key, 'peak_mib'):>10.0f}")


if __name__ == "__main__":
    main()
