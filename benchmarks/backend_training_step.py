"""Efficient-CapsNet's training step on TensorFlow, JAX and PyTorch, side by
side.

Usage:

    python benchmarks/backend_training_step.py --data-dir ../shared/data/mnist
        [--model efficient_capsnet] [--batch-size 16] [--rounds 15]
        [--steps 40] [--backends tensorflow,jax,torch]

A backend is chosen once per process, so each backend trains in a worker
process of its own, started by this script: the builder's compiled model
(`jit_compile="auto"`: XLA on JAX, TensorFlow's graph, PyTorch eager), one
real MNIST training batch from the NumPy input path (the same batch on
every backend, repeated in memory so that the input pipeline is not
timed), trained with `model.fit` (`train_on_batch` would copy the JAX
state back into the variables after every step, which `fit` does once an
epoch). After each worker's warm-up (compilation included), the workers
take turns: each round asks every backend in turn for one `fit` epoch of
`--steps` steps and times it, so load from other processes hits every
backend alike. Printed: the median and minimum ms per step over the
rounds, the ratio of each backend's median to TensorFlow's (>1: slower),
and each worker's peak resident memory. A backend that is not installed
is skipped with a line saying so.
"""

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

_BACKENDS = ("tensorflow", "jax", "torch")


def _worker(model_name, data_dir, batch_size):
    """In a worker process: builds the model, then answers each line of
    stdin (a number of steps) with the seconds those steps took."""
    import keras
    import numpy as np

    from keras_caps import datasets
    from keras_caps.applications import MODELS

    batches = datasets.load("mnist", "train", batch_size=batch_size,
                            data_dir=data_dir, input_pipeline="numpy")
    batch = batches[0]
    model = MODELS[model_name].family.builder("mnist")

    def fit(steps):
        inputs, targets = keras.tree.map_structure(
            lambda array: np.concatenate([np.asarray(array)] * steps), batch)
        history = model.fit(inputs, targets, batch_size=batch_size,
                            epochs=1, shuffle=False, verbose=0)
        return history.history["loss"][-1]  # A float: the steps are done.

    fit(3)  # Compilation and the first allocations.
    print(json.dumps({"ready": keras.backend.backend()}), flush=True)
    for line in sys.stdin:
        steps = int(line)
        start = time.perf_counter()
        fit(steps)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(json.dumps({"seconds": time.perf_counter() - start,
                          "peak_mib": peak}), flush=True)


def _start(backend, arguments):
    environment = dict(os.environ, KERAS_BACKEND=backend,
                       TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        [sys.executable, __file__, "--worker", "--model", arguments.model,
         "--data-dir", arguments.data_dir,
         "--batch-size", str(arguments.batch_size)],
        env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    answer = _answer(process)
    if answer is None:
        return None
    return process


def _answer(process):
    """The worker's next JSON line (skipping anything else it printed), or
    `None` if it ended."""
    for line in process.stdout:
        if line.startswith("{"):
            return json.loads(line)
    return None


def _installed(backend):
    return importlib.util.find_spec(backend) is not None


def _time_rounds(workers, arguments):
    """`{backend: ([ms per step of each round], peak MiB)}`."""
    times = {backend: [] for backend in workers}
    peaks = {}
    for _ in range(arguments.rounds):
        for backend, process in workers.items():
            process.stdin.write(f"{arguments.steps}\n")
            process.stdin.flush()
            answer = _answer(process)
            times[backend].append(1000.0 * answer["seconds"] / arguments.steps)
            peaks[backend] = answer["peak_mib"]
    return {backend: (values, peaks[backend])
            for backend, values in times.items()}


def _report(results, arguments):
    print(f"{arguments.model}, batch {arguments.batch_size}, "
          f"{arguments.rounds} rounds of a {arguments.steps}-step fit epoch "
          "per backend, alternating; one MNIST batch repeated")
    print("| backend | ms/step (median) | (min) | peak RSS MiB | "
          "vs TensorFlow |")
    print("|---|---:|---:|---:|---:|")
    reference = results.get("tensorflow")
    reference_median = (statistics.median(reference[0]) if reference
                        else None)
    for backend, (values, peak) in results.items():
        median = statistics.median(values)
        ratio = (f"{median / reference_median:.2f}×" if reference_median
                 else "n/a")
        print(f"| {backend} | {median:.1f} | {min(values):.1f} | "
              f"{peak:.0f} | {ratio} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--model", default="efficient_capsnet")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--backends", default=",".join(_BACKENDS))
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        _worker(arguments.model, arguments.data_dir, arguments.batch_size)
        return
    workers = {}
    try:
        for backend in arguments.backends.split(","):
            if not _installed(backend):
                print(f"{backend}: not installed, skipped")
                continue
            process = _start(backend, arguments)
            if process is None:
                print(f"{backend}: the worker failed to start, skipped")
                continue
            workers[backend] = process
        _report(_time_rounds(workers, arguments), arguments)
    finally:
        for process in workers.values():
            process.stdin.close()
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
