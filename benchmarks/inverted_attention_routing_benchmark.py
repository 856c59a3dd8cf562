"""Forward+backward time and peak memory of `InvertedAttentionRouting`.

Usage:

    python benchmarks/inverted_attention_routing_benchmark.py       # TF
    KERAS_BACKEND=jax python benchmarks/inverted_attention_routing_benchmark.py
    python benchmarks/inverted_attention_routing_benchmark.py \\
        --batch_size 32 --iterations 2 3 --steps 5

Sizes are the CIFAR-10 capsule part of Tsai et al. 2020: primary
capsules of 32 types with 4x4 poses on the backbone's 16x16 map, then conv
caps 32 types 3x3 stride 2 (-> 7x7), conv caps 32 types 3x3 stride 1
(-> 5x5) and 10 class capsules from the 800 below (423,008 parameters).
Rows:

- `conv caps 1`: the first convolutional layer alone (the largest: it
  materialises 7,225,344 vote values per example), with its own sequential
  passes;
- `stack`: the three layers in an `InvertedAttentionRoutingStack`, with
  the `concurrent` and the `sequential` schedule.

Each row runs in a fresh subprocess, so its memory is measured alone. One
step is `sum(outputs)` and its gradients with respect to the inputs and
all trainable weights, compiled (`tf.function(jit_compile=True)` on
TensorFlow, `jax.jit` on JAX). Time: median (and minimum) of `--steps`
steps after `--warmup` untimed ones (the first compiles). Memory: the
process's peak resident set size (`VmHWM`) above its resident size just
before the first step (Python, the backend, the built layers and the input
already loaded); compilation counts too.

With `num_iterations=2` the concurrent schedule's last pass only changes
the top layer, so the convolutional layers keep their uniform-coupling
poses: it is cheaper than the sequential schedule, which routes each layer
with agreement once.
"""

import argparse
import json
import os
import subprocess
import sys
import time

_MIB = 2.0**20
INPUT_SHAPE = (16, 16, 32, 16)  # (H, W, primary types, 4x4 pose)


def _proc_status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024.0  # kB -> bytes
    raise RuntimeError(f"{field} not in /proc/self/status")


def _build(what, schedule, num_iterations):
    from keras_caps.layers import InvertedAttentionRouting
    from keras_caps.layers import InvertedAttentionRoutingStack

    conv1 = InvertedAttentionRouting(32, 16, kernel_size=3, strides=2,
                                     num_iterations=num_iterations)
    if what == "conv caps 1":
        return conv1
    return InvertedAttentionRoutingStack(
        [conv1, InvertedAttentionRouting(32, 16, kernel_size=3),
         InvertedAttentionRouting(10, 16)],
        num_iterations=num_iterations, schedule=schedule)


def _worker(args):
    """Runs one row; prints one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    backend = keras.backend.backend()
    layer = _build(args.what, args.schedule, args.num_iterations)
    shape = (args.batch_size,) + INPUT_SHAPE
    layer.build(shape)
    x = np.random.default_rng(0).normal(size=shape).astype("float32")

    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)

        @tf.function(jit_compile=True)
        def step(inputs):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                loss = tf.reduce_sum(layer(inputs))
            return loss, tape.gradient(
                loss, [inputs] + layer.trainable_variables)

        def run():
            loss, _ = step(x)
            return float(loss)
    elif backend == "jax":
        import jax

        x = jax.numpy.asarray(x)
        trainable = [v.value for v in layer.trainable_variables]

        def loss_fn(values, inputs):
            outputs, _ = layer.stateless_call(values, [], inputs)
            return jax.numpy.sum(outputs)

        step = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))

        def run():
            loss, gradients = step(trainable, x)
            jax.block_until_ready(gradients)
            return float(loss)
    else:
        raise ValueError("The benchmark runs on the tensorflow and jax "
                         f"backends. Received: backend={backend!r}")

    idle = _proc_status("VmRSS")
    for _ in range(args.warmup):
        run()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss = run()
        times.append(time.perf_counter() - start)
    peak = _proc_status("VmHWM")
    print(json.dumps({
        "what": args.what, "schedule": args.schedule,
        "num_iterations": args.num_iterations, "backend": backend,
        "time_ms": 1e3 * float(np.median(times)),
        "min_ms": 1e3 * float(np.min(times)),
        "memory_mib": (peak - idle) / _MIB,
        "loss_finite": bool(np.isfinite(loss)),
        "num_parameters": layer.count_params()}))


def _measure(what, schedule, num_iterations, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker",
               "--what", what, "--schedule", schedule,
               "--num_iterations", str(num_iterations),
               "--batch_size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            check=False)
    lines = [line for line in result.stdout.splitlines()
             if line.startswith("{")]
    if result.returncode != 0 or not lines:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return {"what": what, "schedule": schedule,
                "num_iterations": num_iterations,
                "error": f"exit {result.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--iterations", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--what", help=argparse.SUPPRESS)
    parser.add_argument("--schedule", help=argparse.SUPPRESS)
    parser.add_argument("--num_iterations", type=int,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return

    rows = []
    for num_iterations in args.iterations:
        rows.append(_measure("conv caps 1", "sequential", num_iterations,
                             args))
        for schedule in ("concurrent", "sequential"):
            rows.append(_measure("stack", schedule, num_iterations, args))
    backend = next((row["backend"] for row in rows if "backend" in row),
                   "?")
    print(f"InvertedAttentionRouting, CIFAR-10 capsule sizes, batch "
          f"{args.batch_size}, backend {backend}, forward+backward, median "
          f"of {args.steps} steps after {args.warmup} warm-up")
    header = (f"{'layers':<12} {'schedule':<11} {'T':>2} {'params':>8} "
              f"{'median ms':>10} {'min ms':>9} {'peak MiB':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        start = (f"{row['what']:<12} {row['schedule']:<11} "
                 f"{row['num_iterations']:>2}")
        if "error" in row:
            print(f"{start} {row['error']}")
            continue
        print(f"{start} {row['num_parameters']:>8,} {row['time_ms']:>10.0f} "
              f"{row['min_ms']:>9.0f} {row['memory_mib']:>9.0f}")


if __name__ == "__main__":
    main()
