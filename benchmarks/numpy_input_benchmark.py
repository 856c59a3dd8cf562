"""The NumPy input pipeline against the tf.data one, on this CPU.

Three measurements, side by side in one run, on real MNIST digits:

1. **Augmentation per worker**: images/s of the official Efficient-CapsNet
   augmentation (rotate, shift, squish, erase) on one thread: the NumPy
   version (`keras_caps.datasets.numpy_augmentation`) against the
   `tf.data` version (`keras_caps.datasets.augmentation`, mapped over
   batches in a `tf.data` pipeline restricted to one thread). Batch 16 is
   the recipe's; 128 shows the per-batch overhead.
2. **Whole training pipeline** (shuffle, augment, one-hot, targets) as
   `model.fit` reads it: `keras_caps.datasets.load(..., input_pipeline=
   "tf_data")` with its default parallelism against `input_pipeline=
   "numpy"` (an `ImageBatches`) read through Keras' `PyDataset` adapter
   with 1 and `--workers` threads (and processes, `--processes`).
3. **Host memory over epochs**: the resident set size after each of
   `--epochs` passes over the NumPy training pipeline, and the peak.

Every throughput is the median of `--repeats` runs.

Usage:

    python benchmarks/numpy_input_benchmark.py --data-dir /data/mnist
"""

import argparse
import json
import os
import resource
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_caps.datasets import augmentation  # noqa: E402
from keras_caps.datasets import idx  # noqa: E402
from keras_caps.datasets import load  # noqa: E402
from keras_caps.datasets import numpy_augmentation  # noqa: E402
from keras_caps.datasets import sources  # noqa: E402


def _median_rate(run, images_per_run, repeats):
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(images_per_run / (time.perf_counter() - start))
    return statistics.median(rates)


def numpy_augmentation_rate(images, batch_size, repeats):
    batches = [images[start:start + batch_size]
               for start in range(0, len(images) - batch_size + 1,
                                  batch_size)]
    rng = np.random.default_rng(0)

    def run():
        for batch in batches:
            numpy_augmentation.augment_mnist(batch, rng)

    return _median_rate(run, len(batches) * batch_size, repeats)


def tf_augmentation_rate(images, batch_size, repeats):
    import tensorflow as tf

    from keras_caps.datasets import pipeline

    dataset = tf.data.Dataset.from_tensor_slices(images).batch(
        batch_size, drop_remainder=True).cache()
    dataset = tf.data.Dataset.zip(dataset, pipeline.batch_seeds(0))
    dataset = dataset.map(augmentation.augment_mnist)  # sequential
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    options.autotune.enabled = False
    dataset = dataset.with_options(options)
    for _ in dataset.take(2):  # trace the graph
        pass

    def run():
        for _ in dataset:
            pass

    return _median_rate(run, (len(images) // batch_size) * batch_size,
                        repeats)


def _pipeline_kwargs(data_dir, batch_size):
    return {"batch_size": batch_size, "data_dir": data_dir, "seed": 0}


def _steady_rate(make_iterator, steps, batch_size, repeats, warmup=20):
    """Median images/s of `steps` batches after `warmup` (start-up, such
    as filling tf.data's 54,000-example shuffle buffer, left out)."""
    rates = []
    for _ in range(repeats):
        iterator, close = make_iterator()
        for _ in range(warmup):
            next(iterator)
        start = time.perf_counter()
        for _ in range(steps):
            next(iterator)
        rates.append(steps * batch_size / (time.perf_counter() - start))
        close()
    return statistics.median(rates)


def tf_pipeline_rate(data_dir, batch_size, steps, repeats):
    dataset = load("mnist", "train", input_pipeline="tf_data",
                   **_pipeline_kwargs(data_dir, batch_size))

    def make_iterator():
        return iter(dataset), lambda: None

    return _steady_rate(make_iterator, steps, batch_size, repeats)


def numpy_pipeline_rate(data_dir, batch_size, steps, repeats, workers=1,
                        use_multiprocessing=False):
    from keras.src.trainers.data_adapters import py_dataset_adapter

    batches = load("mnist", "train", input_pipeline="numpy",
                   workers=workers, use_multiprocessing=use_multiprocessing,
                   **_pipeline_kwargs(data_dir, batch_size))

    def make_iterator():
        adapter = py_dataset_adapter.PyDatasetAdapter(batches)

        def close():
            if adapter.enqueuer is not None:
                adapter.enqueuer.stop()
            batches.on_epoch_end()

        return adapter.get_numpy_iterator(), close

    return _steady_rate(make_iterator, steps, batch_size, repeats)


def _resident_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_over_epochs(data_dir, batch_size, epochs):
    before = _resident_mib()
    batches = load("mnist", "train", input_pipeline="numpy",
                   **_pipeline_kwargs(data_dir, batch_size))
    resident = [_resident_mib()]
    for _ in range(epochs):
        for index in range(len(batches)):
            batches[index]
        batches.on_epoch_end()
        resident.append(_resident_mib())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rss_mib_before_loading": round(before, 1),
            "rss_mib_loaded_then_after_each_epoch": [round(value, 1)
                                         for value in resident],
            "peak_rss_mib": round(peak, 1), "batches_per_epoch": len(batches)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir",
                        default=os.environ.get(sources.DATA_DIR_ENV),
                        help="Folder of the four MNIST IDX files.")
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=300,
                        help="Batches per whole-pipeline run.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", action="store_true",
                        help="Also time worker processes.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--output", help="Also write the results here.")
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("pass --data-dir (or set KERAS_CAPS_DATA_DIR)")
    train_images = idx.read_idx_dataset(args.data_dir)["train"][0]
    images = train_images[:args.images].astype(np.float32)[..., None]
    results = {"cpu_count": os.cpu_count(), "augmentation_per_worker": {}}
    for batch_size in (16, 128):
        mine = numpy_augmentation_rate(images, batch_size, args.repeats)
        theirs = tf_augmentation_rate(images, batch_size, args.repeats)
        results["augmentation_per_worker"][batch_size] = {
            "numpy_images_per_s": round(mine),
            "tf_data_images_per_s": round(theirs),
            "numpy_over_tf_data": round(mine / theirs, 2)}
        print(f"augmentation, batch {batch_size}, one thread: NumPy "
              f"{mine:,.0f} images/s, tf.data {theirs:,.0f} images/s "
              f"(NumPy/tf.data {mine / theirs:.2f})", flush=True)
    pipeline_rates = {"tf_data_default": tf_pipeline_rate(
        args.data_dir, 16, args.steps, args.repeats)}
    runs = [("numpy_1_thread", 1, False),
            (f"numpy_{args.workers}_threads", args.workers, False)]
    if args.processes:
        runs.append((f"numpy_{args.workers}_processes", args.workers, True))
    for name, workers, processes in runs:
        pipeline_rates[name] = numpy_pipeline_rate(
            args.data_dir, 16, args.steps, args.repeats, workers, processes)
    results["training_pipeline_batch_16_images_per_s"] = {
        name: round(rate) for name, rate in pipeline_rates.items()}
    for name, rate in pipeline_rates.items():
        print(f"training pipeline, batch 16, {name}: {rate:,.0f} images/s",
              flush=True)
    results["memory"] = memory_over_epochs(args.data_dir, 16, args.epochs)
    print("NumPy pipeline memory:", json.dumps(results["memory"]))
    if args.output:
        with open(args.output, "w") as file:
            json.dump(results, file, indent=2)


if __name__ == "__main__":
    main()
