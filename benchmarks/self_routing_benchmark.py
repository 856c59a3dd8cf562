"""Training-step time and peak memory of `SelfRouting` vs `DynamicRouting`.

Usage (TensorFlow backend):

    python benchmarks/self_routing_benchmark.py
    python benchmarks/self_routing_benchmark.py --batch_size 32 --steps 15

Hahn, Pyeon & Kim (2019) report that self-routing needs less computation
than routing-by-agreement. This measures it at the CapsNet digit-capsule
sizes (1152 primary capsules of 8-D -> 10 capsules of 16-D), side by side
in one process:

- `self-routing`: `keras_caps.layers.SelfRouting(10, 16,
  input_format="vectors", output_format="vectors")`, the form a capsule
  classifier uses on squashed primary capsules (activation = length), and,
  with `--formats capsules`, the form with an activation entry;
- `dynamic x3`: `keras_caps.layers.DynamicRouting(10, 16,
  num_iterations=3)`, Sabour et al.'s routing.

One step is the forward pass, the sum of the outputs and the gradients with
respect to the inputs and every trainable weight, in a `tf.function`. Times
are the median (and minimum) of `--steps` timed steps after `--warmup`
untimed ones; the layers' steps alternate, so load from other processes
hits all alike. The ratios are dynamic routing's over self-routing's (the
minimum is the steadier one on a loaded host).
Peak memory is the TensorFlow CPU allocator's peak during one step above
what was in use before it.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from side_by_side import make_step  # noqa: E402
from side_by_side import peak_memory_mib  # noqa: E402
from side_by_side import time_steps  # noqa: E402

from keras_caps.layers import DynamicRouting  # noqa: E402
from keras_caps.layers import SelfRouting  # noqa: E402


def _inputs(rng, args, input_format):
    """Squashed-like vectors `(b, N, d)`, or capsules `(b, N, d + 1)` with
    an activation in (0, 1)."""
    vectors = rng.normal(size=(args.batch_size, args.num_inputs,
                               args.input_dim)) * 0.1
    if input_format == "vectors":
        return tf.constant(vectors.astype("float32"))
    activations = rng.uniform(size=(args.batch_size, args.num_inputs, 1))
    return tf.constant(np.concatenate([vectors, activations], -1).astype(
        "float32"))


def _layers(args, input_format):
    """`{name: (layer, inputs)}`, each layer built on its inputs."""
    rng = np.random.default_rng(0)
    vectors = _inputs(rng, args, "vectors")
    routed = SelfRouting(args.num_capsules, args.capsule_dim,
                         input_format=input_format,
                         output_format=input_format)
    routed_inputs = (vectors if input_format == "vectors"
                     else _inputs(rng, args, input_format))
    dynamic = DynamicRouting(args.num_capsules, args.capsule_dim,
                             num_iterations=args.iterations)
    result = {"self-routing": (routed, routed_inputs),
              f"dynamic x{args.iterations}": (dynamic, vectors)}
    for layer, inputs in result.values():
        layer(inputs)
    return result


def _run(args, input_format):
    layers = _layers(args, input_format)
    steps = {name: make_step(layer, args.jit_compile)
             for name, (layer, _) in layers.items()}
    # `time_steps` feeds one input to all steps; give each its own.
    bound = {name: (lambda _, s=steps[name], x=layers[name][1]: s(x))
             for name in steps}
    times = time_steps(bound, None, args.warmup, args.steps)
    rows = []
    for name, (layer, inputs) in layers.items():
        median, minimum = times[name]
        rows.append((name, median, minimum,
                     peak_memory_mib(steps[name], inputs),
                     layer.count_params()))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_inputs", type=int, default=1152)
    parser.add_argument("--input_dim", type=int, default=8)
    parser.add_argument("--num_capsules", type=int, default=10)
    parser.add_argument("--capsule_dim", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=3,
                        help="Dynamic routing iterations.")
    parser.add_argument("--formats", nargs="+", default=["vectors"],
                        choices=["vectors", "capsules"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=11)
    parser.add_argument("--jit_compile", action="store_true")
    args = parser.parse_args()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
          f"{os.cpu_count()} CPUs, jit_compile={args.jit_compile}")
    print(f"batch {args.batch_size}: {args.num_inputs} x {args.input_dim} "
          f"-> {args.num_capsules} x {args.capsule_dim}; forward+backward, "
          f"median of {args.steps} steps after {args.warmup} warm-up steps")
    header = (f"{'format':>8} | {'layer':>13} | {'median ms':>9} | "
              f"{'(min)':>7} | {'peak MiB':>8} | {'parameters':>10}")
    for input_format in args.formats:
        print(header)
        print("-" * len(header))
        rows = _run(args, input_format)
        for name, median, minimum, mib, params in rows:
            print(f"{input_format:>8} | {name:>13} | {median:>9.1f} | "
                  f"{minimum:>7.1f} | {mib:>8.1f} | {params:>10,}")
        print(f"dynamic routing / self-routing, step time: median "
              f"{rows[1][1] / rows[0][1]:.2f}x, minimum "
              f"{rows[1][2] / rows[0][2]:.2f}x, peak memory "
              f"{rows[1][3] / rows[0][3]:.2f}x\n")


if __name__ == "__main__":
    main()
