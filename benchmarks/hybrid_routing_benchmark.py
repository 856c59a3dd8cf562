"""Forward+backward time of `HybridRouting` against 3-iteration
`DynamicRouting`, and against the hybrid's former per-iteration structure.

Usage (TensorFlow backend):

    python benchmarks/hybrid_routing_benchmark.py
    python benchmarks/hybrid_routing_benchmark.py --steps 30 --jit_compile

At the CapsNet digit-capsule sizes, `(64, 1152, 8) -> 10 x 16` by default,
one training step (forward, `sum` of the outputs, gradients with respect to
the inputs and every trainable weight) runs inside a `tf.function` for

- `DynamicRouting`, 3 routing-by-agreement iterations (the baseline);
- `HybridRouting`, bilinear and concat: the attention terms that do not
  change across iterations (the bilinear score, the vote half of the concat
  score) computed once per call;
- the same hybrids with those terms recomputed in every iteration, as the
  hybrid did when it was part of `DynamicRouting` (`PerIterationHybrid`, a
  faithful re-implementation of that structure: same weights, same
  outputs).

Times are the median (and minimum) of `--steps` timed steps after
`--warmup` untimed ones, the layers' steps alternating; the last column is
each layer's step time as a multiple of `DynamicRouting`'s.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from side_by_side import make_step  # noqa: E402
from side_by_side import time_steps  # noqa: E402

from keras_caps.layers import DynamicRouting  # noqa: E402
from keras_caps.layers import HybridRouting  # noqa: E402


class PerIterationHybrid(HybridRouting):
    """`HybridRouting` recomputing its whole attention term each iteration."""

    def extra_logits(self, inputs, wide_votes):
        parent = super()

        def every_iteration(outputs, stopped):
            return parent.extra_logits(inputs, wide_votes)(outputs, stopped)

        return every_iteration


def _layers(args):
    sizes = (args.num_capsules, args.capsule_dim)
    layers = {"DynamicRouting": DynamicRouting(*sizes)}
    for form in ("bilinear", "concat"):
        layers[f"HybridRouting {form}"] = HybridRouting(
            *sizes, attention=form, attention_weight=0.5)
        layers[f"per-iteration {form}"] = PerIterationHybrid(
            *sizes, attention=form, attention_weight=0.5)
    return layers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_inputs", type=int, default=1152)
    parser.add_argument("--input_dim", type=int, default=8)
    parser.add_argument("--num_capsules", type=int, default=10)
    parser.add_argument("--capsule_dim", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--jit_compile", action="store_true",
                        help="Compile every step with XLA.")
    args = parser.parse_args()

    inputs = tf.constant(np.random.default_rng(0).normal(
        size=(args.batch_size, args.num_inputs, args.input_dim)).astype(
            "float32") * 0.1)
    layers = _layers(args)
    steps = {}
    for name, layer in layers.items():
        layer.build(inputs.shape)
        steps[name] = make_step(layer, args.jit_compile)
    # The re-implementation computes the same function as the new layer.
    for form in ("bilinear", "concat"):
        layers[f"per-iteration {form}"].set_weights(
            layers[f"HybridRouting {form}"].get_weights())
        np.testing.assert_allclose(
            layers[f"per-iteration {form}"](inputs),
            layers[f"HybridRouting {form}"](inputs), atol=1e-6)

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
          f"{os.cpu_count()} CPUs, jit_compile={args.jit_compile}")
    print(f"batch {args.batch_size}: {args.num_inputs} x {args.input_dim} "
          f"-> {args.num_capsules} x {args.capsule_dim}, 3 iterations; "
          f"forward+backward, median of {args.steps} steps after "
          f"{args.warmup} warm-up steps")
    times = time_steps(steps, inputs, args.warmup, args.steps)
    width = max(len(name) for name in layers)
    header = f"| {'layer':<{width}} | ms/step | (min) | x DynamicRouting |"
    print(header)
    print("|" + "|".join("-" * len(cell)
                         for cell in header.split("|")[1:-1]) + "|")
    for name in layers:
        median, minimum = times[name]
        print(f"| {name:<{width}} | {median:>7.1f} | {minimum:>5.1f} | "
              f"{median / times['DynamicRouting'][0]:>15.2f}x |")


if __name__ == "__main__":
    main()
