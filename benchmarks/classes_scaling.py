"""Routing time and memory against the number of classes: one training
step of `CapsuleClassifier` per router at 10, 100 and 1,000 classes, side
by side in one run.

Usage:

    python benchmarks/classes_scaling.py --output results/classes_scaling/x.json

Every model is the MNIST preset's stem and primary capsules (28x28
images, batch 16, no decoder) with the router's class capsules for K
classes: the votes `(batch, primary capsules, K, 16)` and the couplings
`(batch, heads, primary capsules, K)` grow linearly in K, the stem does
not. A step is the forward pass and the gradients of the summed class
capsule lengths with respect to the images and every weight
(`side_by_side.make_step`); the class counts of one router alternate, so
machine load hits them alike. Reports the median and minimum ms per step,
the TensorFlow CPU allocator's peak MiB during one step (its BFC
allocator, which `side_by_side` turns on), the trainable
parameters, and the machine's load.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
from int8_measurement import machine_record
from int8_measurement import write_record
from side_by_side import make_step
from side_by_side import peak_memory_mib
from side_by_side import time_steps

from keras_caps.applications import CapsuleClassifier

_BATCH = 16


def _router_rows(router, class_counts, images, warmup, steps):
    """One router's rows: per class count, the step's time and memory."""
    models = {count: CapsuleClassifier(
        "mnist", router=router, num_classes=count, reconstruction=False,
        compile=False) for count in class_counts}
    steps_by_count = {count: make_step(model)
                      for count, model in models.items()}
    times = time_steps(steps_by_count, images, warmup, steps)
    return [{"router": router, "classes": count,
             "median_ms": times[count][0], "min_ms": times[count][1],
             "peak_mib": peak_memory_mib(steps_by_count[count], images),
             "trainable_parameters": int(sum(
                 np.prod(weight.shape)
                 for weight in models[count].trainable_weights))}
            for count in class_counts]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--routers", default="uniform,self_attention,"
                        "dynamic,vector")
    parser.add_argument("--classes", default="10,100,1000")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    if os.path.exists(args.output):
        parser.error(f"--output {args.output!r} exists; choose a new file")
    import tensorflow as tf

    class_counts = [int(count) for count in args.classes.split(",")]
    images = tf.constant(np.random.default_rng(0).uniform(
        0, 255, (_BATCH, 28, 28, 1)).astype("float32"))
    rows = []
    for router in args.routers.split(","):
        rows += _router_rows(router, class_counts, images, args.warmup,
                             args.steps)
        print(rows[-len(class_counts):], flush=True)
    write_record(args.output, {**machine_record(), "batch_size": _BATCH,
                               "image_shape": [28, 28, 1],
                               "steps": args.steps, "rows": rows})


if __name__ == "__main__":
    main()
