"""Test error and speed of a trained model's serving graph in each precision.

Usage:

    python benchmarks/serving_precision.py \\
        --model-path runs/efficient_capsnet_mnist/model.keras \\
        --data-dir ../shared/data/mnist

Reads the MNIST-format test files with NumPy, then serves them through
`keras_caps.applications.serving_model(model, precision=...)` for the
unfolded inference graph (`inference_model`), float32 and mixed_bfloat16,
and prints the test error, the number of test images whose predicted class
differs from the unfolded float32 graph's, and the median time of a batch.
Check this before serving a model in reduced precision.
"""

import argparse
import statistics
import time

import keras
import numpy as np

import keras_caps  # noqa: F401  (registers the layers for loading)
from keras_caps.applications import inference_model
from keras_caps.applications import serving_model
from keras_caps.datasets import idx


def _median_batch_seconds(model, images, repeats):
    predict = model.predict_on_batch
    predict(images)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        predict(images)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    images, labels = idx.read_idx_dataset(args.data_dir)["test"]
    images = images[..., None].astype("float32")
    model = keras.saving.load_model(args.model_path)
    variants = {
        "inference_model (unfolded)": inference_model(model),
        "serving_model float32": serving_model(model, precision="float32"),
        "serving_model mixed_bfloat16": serving_model(
            model, precision="mixed_bfloat16"),
    }
    reference = None
    print(f"{'graph':<30}{'test error':>11}{'differs':>9}"
          f"{'ms/batch of ' + str(args.batch_size):>18}")
    for name, variant in variants.items():
        predicted = variant.predict(images, batch_size=args.batch_size,
                                    verbose=0).argmax(-1)
        reference = predicted if reference is None else reference
        seconds = _median_batch_seconds(variant, images[:args.batch_size],
                                        args.repeats)
        print(f"{name:<30}{100 * np.mean(predicted != labels):>10.2f}%"
              f"{int(np.sum(predicted != reference)):>9}"
              f"{1000 * seconds:>18.1f}")


if __name__ == "__main__":
    main()
