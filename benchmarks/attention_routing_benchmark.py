"""Forward+backward time and peak memory of `AttentionRouting` vs 3-iteration
`DynamicRouting`, side by side.

Usage (TensorFlow backend):

    python benchmarks/attention_routing_benchmark.py
    python benchmarks/attention_routing_benchmark.py --steps 20 --jit_compile

At the CapsNet digit-capsule sizes, `(64, 1152, 8) -> 10 x 16` by default,
one training step (forward, `sum` of the outputs, gradients with respect to
the inputs and every trainable weight) runs inside a `tf.function` for

- `DynamicRouting`, `--dynamic_iterations` (3) routing-by-agreement
  iterations (Sabour et al., 2017);
- `AttentionRouting`, one query-key-value pass, with 1 and 4 heads
  (`--heads`), per-parent votes, `key_dim=16`.

Times are the median (and minimum) of `--steps` timed steps after
`--warmup` untimed ones; the layers' steps alternate, so load from other
processes hits all of them alike. Peak memory is the TensorFlow CPU
allocator's peak during one step above what was in use before it
(`tf.config.experimental.get_memory_info`). The last columns compare each
layer with `DynamicRouting`: its speedup, and its peak memory as a share of
`DynamicRouting`'s.
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

from keras_caps.layers import AttentionRouting  # noqa: E402
from keras_caps.layers import DynamicRouting  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_inputs", type=int, default=1152)
    parser.add_argument("--input_dim", type=int, default=8)
    parser.add_argument("--num_capsules", type=int, default=10)
    parser.add_argument("--capsule_dim", type=int, default=16)
    parser.add_argument("--dynamic_iterations", type=int, default=3)
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--key_dim", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--jit_compile", action="store_true",
                        help="Compile every step with XLA.")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(
        size=(args.batch_size, args.num_inputs, args.input_dim)).astype(
            "float32") * 0.1)
    layers = {f"DynamicRouting, {args.dynamic_iterations} iterations":
              DynamicRouting(args.num_capsules, args.capsule_dim,
                             num_iterations=args.dynamic_iterations)}
    for num_heads in args.heads:
        layers[f"AttentionRouting, 1 pass, {num_heads} head"
               + ("s" if num_heads > 1 else "")] = AttentionRouting(
                   args.num_capsules, args.capsule_dim, num_heads=num_heads,
                   key_dim=args.key_dim)
    steps = {}
    for name, layer in layers.items():
        layer.build(inputs.shape)
        steps[name] = make_step(layer, args.jit_compile)

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
          f"{os.cpu_count()} CPUs, jit_compile={args.jit_compile}")
    print(f"batch {args.batch_size}: {args.num_inputs} x {args.input_dim} "
          f"-> {args.num_capsules} x {args.capsule_dim}; forward+backward, "
          f"median of {args.steps} steps after {args.warmup} warm-up steps")
    times = time_steps(steps, inputs, args.warmup, args.steps)
    memory = {name: peak_memory_mib(step, inputs)
              for name, step in steps.items()}
    baseline = next(iter(layers))
    width = max(len(name) for name in layers)
    header = (f"| {'layer':<{width}} | ms/step | (min) | peak MiB | "
              f"speedup | memory |")
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in
                         header.split("|")[1:-1]) + "|")
    for name in layers:
        median, minimum = times[name]
        print(f"| {name:<{width}} | {median:>7.1f} | {minimum:>5.1f} | "
              f"{memory[name]:>8.1f} | "
              f"{times[baseline][0] / median:>6.2f}x | "
              f"{memory[name] / memory[baseline]:>5.0%} |")


if __name__ == "__main__":
    main()
