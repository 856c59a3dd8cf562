"""Speed and memory of PGD on Efficient-CapsNet over the MNIST test set.

Usage:

    python benchmarks/attack_benchmark.py --data-dir DIR [--model FILE]
        [--images 10000] [--steps 10] [--batch-size 256]
        [--target output|votes] [--memory-steps 1,10,40]

Runs `keras_caps.evaluation.attacks.adversarial_images` (PGD, L-inf,
epsilon 0.1, the margin loss, one random start) over the first `--images`
MNIST test images (all 10,000 by default; `DIR` holds the IDX files, or
TFDS prepares them without it) against `--model` (a `.keras` file of a
capsule model, read through `keras_caps.evaluation.robustness.classifier`)
or, without it, a freshly built `EfficientCapsNet("mnist")` (untrained:
the time does not depend on the weights, the accuracy does, and is then
meaningless). It prints the wall time, the images per second, the
accuracy on clean and on adversarial images, and the time of a second
run, after the step is traced.

Memory: the same attack on the first `--batch-size` images with each
number of steps in `--memory-steps`, each in a fresh process, prints the
peak resident memory (`ru_maxrss`) of each and the ratio of the largest
to the smallest; the attack loop calls one traced step per step, so the
peak should not grow with the number of steps (ratio near 1).
"""

import argparse
import json
import os
import subprocess
import sys
import time


def _predictor(model_path):
    import keras

    from keras_caps import applications
    from keras_caps.evaluation.robustness import classifier

    if model_path:
        model = keras.saving.load_model(model_path, compile=False)
    else:
        model = applications.EfficientCapsNet("mnist")
    return classifier(model)


def _test_images(data_dir, count):
    from keras_caps.evaluation.robustness import load_test_arrays

    images, labels = load_test_arrays("mnist", data_dir=data_dir)
    return images[:count], labels[:count]


def _accuracy(predictor, images, labels, batch_size):
    import numpy as np

    from keras_caps.evaluation.attacks import _predict_classes

    return float(np.mean(
        _predict_classes(predictor, images, batch_size) == labels))


def speed(args):
    from keras_caps.evaluation import attacks

    predictor = _predictor(args.model)
    images, labels = _test_images(args.data_dir, args.images)
    settings = {"epsilon": args.epsilon, "steps": args.steps,
                "batch_size": args.batch_size, "target": args.target}
    for run in ("first (traces the step)", "second"):
        start = time.perf_counter()
        adversarial = attacks.adversarial_images(predictor, images, labels,
                                                 **settings)
        seconds = time.perf_counter() - start
        print(f"PGD-{args.steps} L-inf eps={args.epsilon} "
              f"target={args.target}, {run} run: {len(images)} images in "
              f"{seconds:.1f} s, {len(images) / seconds:.0f} images/s",
              flush=True)
    print(f"accuracy: clean "
          f"{_accuracy(predictor, images, labels, args.batch_size):.4f}, "
          f"adversarial "
          f"{_accuracy(predictor, adversarial, labels, args.batch_size):.4f}"
          + ("" if args.model else " (untrained model)"), flush=True)


_MEMORY_CHILD = """
import json, resource, runpy, sys
sys.argv = [sys.argv[1], *json.loads(sys.argv[2])]
runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def memory(args):
    peaks = {}
    for steps in [int(value) for value in args.memory_steps.split(",")]:
        child_args = ["--images", str(args.batch_size), "--steps",
                      str(steps), "--batch-size", str(args.batch_size),
                      "--target", args.target, "--memory-steps", "",
                      "--epsilon", str(args.epsilon)]
        if args.data_dir:
            child_args += ["--data-dir", args.data_dir]
        if args.model:
            child_args += ["--model", args.model]
        result = subprocess.run(
            [sys.executable, "-c", _MEMORY_CHILD, os.path.abspath(__file__),
             json.dumps(child_args)],
            capture_output=True, text=True, check=True)
        peaks[steps] = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"PGD-{steps} on {args.batch_size} images: peak "
              f"{peaks[steps] / 1024:.0f} MiB", flush=True)
    print(f"peak memory ratio, most / fewest steps: "
          f"{peaks[max(peaks)] / peaks[min(peaks)]:.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--target", default="output",
                        choices=("output", "votes"))
    parser.add_argument("--memory-steps", default="1,10,40")
    args = parser.parse_args()
    speed(args)
    if args.memory_steps:
        memory(args)


if __name__ == "__main__":
    main()
