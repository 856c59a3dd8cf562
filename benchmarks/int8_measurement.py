"""What the int8 benchmarks share: predicted classes over a test set,
alternated batch-1 latencies, and the record's machine description.

Used by `litert_int8.py` (LiteRT exports) and `keras_int8.py` (Keras
models quantized with `keras_caps.inference.quantize_int8`).
"""

import json
import os
import platform
import statistics
import sys
import time

import keras
import numpy as np


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
