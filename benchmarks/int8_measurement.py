"""What the int8 benchmarks share: predicted classes over a test set,
alternated batch-1 latencies, and the record's machine description.

Used by `litert_int8.py` (LiteRT exports) and `keras_int8.py` (Keras
models quantized with `keras_caps.inference.quantize_int8`).
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import keras
import numpy as np

from keras_caps.datasets import idx


def benchmark_arguments(description, repeats):
    """The `argparse` parser of the flags both benchmarks take
    (`--model-path`, `--data-dir`, `--output`, `--batch-size`,
    `--repeats`, defaulting to `repeats`); each adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=repeats)
    return parser


def check_new_output(parser, args):
    """Refuses an `--output` that exists: records are never replaced."""
    if os.path.exists(args.output):
        parser.error(f"--output {args.output!r} exists; choose a new file")


def mnist_test_set(data_dir):
    """`(images, labels)`: the MNIST-format test set of `data_dir`, images
    float32 `(count, 28, 28, 1)` in raw pixels."""
    images, labels = idx.read_idx_dataset(data_dir)["test"]
    return images[..., None].astype("float32"), labels


def keras_scores(served):
    """`predict(batch)` -> the class scores of the inference model
    `served` (without reconstruction: its one output)."""
    return served.predict_on_batch


def predicted_classes(predict, images, batch_size):
    """The predicted class of every image: `predict(batch)` returns the
    class scores `(batch, num_classes)`."""
    return np.concatenate([
        np.argmax(predict(images[start:start + batch_size]), axis=-1)
        for start in range(0, len(images), batch_size)])


def alternated_latencies(predictors, image, repeats):
    """Median seconds of one single-image call per predictor, the calls
    alternated between them so that all see the same machine load."""
    times = {name: [] for name in predictors}
    for predict in predictors.values():
        predict(image)  # Warm-up.
    for _ in range(repeats):
        for name, predict in predictors.items():
            start = time.perf_counter()
            predict(image)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def machine_record():
    """The command, the hardware (with the load from other work over the
    last 1, 5 and 15 minutes) and the versions, for a benchmark record."""
    return {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "hardware": {"machine": platform.machine(),
                     "processor": platform.processor(),
                     "cpus": os.cpu_count(),
                     "load_average": os.getloadavg()},
        "versions": {"keras": keras.__version__,
                     "python": platform.python_version()},
    }


def write_record(path, record):
    """Writes `record` as JSON to the new file `path` and prints it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "x", encoding="utf-8") as file:
        json.dump(record, file, indent=2)
        file.write("\n")
    print(json.dumps(record, indent=2))
