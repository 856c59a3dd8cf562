"""Forward+backward time and peak memory of `VectorRouting` (issue 6).

Usage:

    python benchmarks/vector_routing_benchmark.py            # TensorFlow
    KERAS_BACKEND=jax python benchmarks/vector_routing_benchmark.py
    python benchmarks/vector_routing_benchmark.py --sizes 10000 40000 \\
        --million 0 --eager_max_inputs 40000 --steps 3

Sizes are the issue's: batch 1, input_dim = capsule_dim = 64,
num_capsules = 32, two iterations, a fixed number of inputs (the
`num_inputs` weights, as the reference's `n_inp`), and num_inputs in
{10k, 40k, 160k, 640k}, plus one memory-efficient run with a million
inputs. Each (mode, num_inputs) runs in a fresh subprocess, so its memory
is measured alone:

- one training step is `sum(layer(x))` and its gradients with respect to
  all trainable weights, compiled (`tf.function(jit_compile=True)` on
  TensorFlow, `jax.jit` on JAX);
- time: median (and minimum) wall time of `--steps` steps after
  `--warmup` untimed ones (the first compiles);
- memory: the process's peak resident set size (`VmHWM`) above its
  resident size just before the first step, i.e. with Python, the
  backend, the built layer and the input already loaded ("peak RSS above
  the idle process", the issue's measure). Compilation counts too.

`efficient` is the default memory-efficient mode (the M-step contracts
over inputs first; no vote tensor); `eager` is `memory_efficient=False`,
which materialises the (num_inputs, num_capsules, capsule_dim) vote tensor
(1.3 GB in float32 at 160k inputs, 5.2 GB at 640k, before its gradient):
by default it runs up to `--eager_max_inputs=160000` on CPU; larger eager
sizes need a machine (or GPU) with well over 16 GB free.

The baseline row is the issue's measurement of the reference PyTorch
implementation (`glassroom/heinsen_routing`, `EfficientVectorRouting`) on
this 2-core CPU machine kind at 160k inputs: about 805 ms and about 1.1 GB
above the idle process. The growth exponents are least-squares slopes of
log(time) and log(memory) against log(num_inputs) over the sizes run; the
local exponent between the two largest sizes is printed too, because a
constant overhead (compilation, the runtime) flattens the overall fit.
"""

import argparse
import json
import os
import subprocess
import sys
import time

_MIB = 2.0**20
BASELINE = {"num_inputs": 160_000, "time_ms": 805.0, "memory_mib": 1100.0}
NUM_CAPSULES, DIM, NUM_ITERATIONS = 32, 64, 2


def _proc_status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024.0  # kB -> bytes
    raise RuntimeError(f"{field} not in /proc/self/status")


def _worker(args):
    """Runs one (mode, num_inputs) measurement; prints one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    from keras_caps.layers import VectorRouting

    backend = keras.backend.backend()
    layer = VectorRouting(NUM_CAPSULES, DIM, num_inputs=args.num_inputs,
                          num_iterations=NUM_ITERATIONS,
                          memory_efficient=args.mode == "efficient")
    layer.build((1, args.num_inputs, DIM))
    x = np.random.default_rng(0).normal(
        size=(1, args.num_inputs, DIM)).astype("float32")

    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)

        @tf.function(jit_compile=True)
        def step(inputs):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(inputs))
            return loss, tape.gradient(loss, layer.trainable_variables)

        def run():
            loss, gradients = step(x)
            return float(loss), gradients
    elif backend == "jax":
        import jax

        x = jax.numpy.asarray(x)
        trainable = [v.value for v in layer.trainable_variables]

        def loss_fn(values, inputs):
            outputs, _ = layer.stateless_call(values, [], inputs)
            return jax.numpy.sum(outputs)

        step = jax.jit(jax.value_and_grad(loss_fn))

        def run():
            loss, gradients = step(trainable, x)
            jax.block_until_ready(gradients)
            return float(loss), gradients
    else:
        raise ValueError("The benchmark runs on the tensorflow and jax "
                         f"backends. Received: backend={backend!r}")

    idle = _proc_status("VmRSS")
    for _ in range(args.warmup):
        run()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss, _ = run()
        times.append(time.perf_counter() - start)
    peak = _proc_status("VmHWM")
    print(json.dumps({
        "mode": args.mode, "num_inputs": args.num_inputs,
        "backend": backend, "time_ms": 1e3 * float(np.median(times)),
        "min_ms": 1e3 * float(np.min(times)),
        "memory_mib": (peak - idle) / _MIB, "loss_finite": bool(
            np.isfinite(loss)),
        "num_parameters": layer.count_params()}))


def _measure(mode, num_inputs, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker",
               "--mode", mode, "--num_inputs", str(num_inputs),
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
        return {"mode": mode, "num_inputs": num_inputs,
                "error": f"exit {result.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def _exponent(rows, key):
    import numpy as np

    rows = [r for r in rows if "error" not in r and r[key] > 0]
    if len(rows) < 2:
        return float("nan"), float("nan")
    n = np.log([r["num_inputs"] for r in rows])
    y = np.log([r[key] for r in rows])
    fitted = float(np.polyfit(n, y, 1)[0])
    local = float((y[-1] - y[-2]) / (n[-1] - n[-2]))
    return fitted, local


def _linear_fit(rows, key, unit):
    """`value = a + b * n` by least squares, with its worst residual."""
    import numpy as np

    n = np.array([r["num_inputs"] for r in rows], dtype="float64")
    y = np.array([r[key] for r in rows], dtype="float64")
    slope, intercept = np.polyfit(n, y, 1)
    worst = np.max(np.abs(intercept + slope * n - y) / y)
    per_input = slope * (_MIB if unit == "MiB" else 1e3)
    per_unit = "bytes" if unit == "MiB" else "us"
    return (f"{key}: linear fit {intercept:.0f} {unit} + {per_input:.3g} "
            f"{per_unit} per input, worst relative residual {worst:.1%}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 40_000, 160_000, 640_000])
    parser.add_argument("--million", type=int, default=1_000_000,
                        help="One extra efficient-mode size; 0 to skip.")
    parser.add_argument("--eager_max_inputs", type=int, default=160_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("efficient", "eager"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--num_inputs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return

    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    print(f"VectorRouting forward+backward, backend={backend}, batch 1, "
          f"input_dim = capsule_dim = {DIM}, num_capsules = {NUM_CAPSULES}, "
          f"{NUM_ITERATIONS} iterations, fixed num_inputs; median of "
          f"{args.steps} steps after {args.warmup} warm-up; memory = peak "
          f"RSS above the idle process; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")
    results = {"efficient": [], "eager": []}
    for num_inputs in sorted(args.sizes):
        for mode in ("efficient", "eager"):
            if mode == "eager" and num_inputs > args.eager_max_inputs:
                continue
            row = _measure(mode, num_inputs, args)
            results[mode].append(row)
            print("  measured", json.dumps(row), flush=True)
    million = None
    if args.million:
        million = _measure("efficient", args.million, args)
        print("  measured", json.dumps(million), flush=True)

    print()
    header = (f"{'num_inputs':>10} | {'efficient ms':>12} | "
              f"{'efficient MiB':>13} | {'eager ms':>9} | {'eager MiB':>9} | "
              f"{'baseline ms':>11} | {'baseline MiB':>12}")
    print(header)
    print("-" * len(header))
    eager = {r["num_inputs"]: r for r in results["eager"]}

    def cells(row):
        if row is None:
            return "skipped", "skipped"
        if "error" in row:
            return "failed", "failed"
        return f"{row['time_ms']:.0f}", f"{row['memory_mib']:.0f}"

    for row in results["efficient"] + ([million] if million else []):
        eff_ms, eff_mib = cells(row)
        eag_ms, eag_mib = cells(eager.get(row["num_inputs"]))
        if row["num_inputs"] == BASELINE["num_inputs"]:
            base_ms = f"{BASELINE['time_ms']:.0f}"
            base_mib = f"{BASELINE['memory_mib']:.0f}"
        else:
            base_ms = base_mib = ""
        print(f"{row['num_inputs']:>10} | {eff_ms:>12} | {eff_mib:>13} | "
              f"{eag_ms:>9} | {eag_mib:>9} | {base_ms:>11} | {base_mib:>12}")
    for row in results["efficient"] + results["eager"] + [million]:
        if row and "error" in row:
            print(f"  {row['mode']} at {row['num_inputs']}: {row['error']}")

    print()
    for mode in ("efficient", "eager"):
        rows = results[mode]
        if len(rows) < 2:
            continue
        span = f"{rows[0]['num_inputs']} -> {rows[-1]['num_inputs']}"
        time_fit, time_local = _exponent(rows, "time_ms")
        memory_fit, memory_local = _exponent(rows, "memory_mib")
        print(f"{mode:>9} growth exponents over {span}: time "
              f"{time_fit:.2f} (largest two sizes {time_local:.2f}), memory "
              f"{memory_fit:.2f} (largest two sizes {memory_local:.2f})")
        ok = [r for r in rows if "error" not in r]
        if len(ok) >= 3:
            for key, unit in (("time_ms", "ms"), ("memory_mib", "MiB")):
                print(f"          {_linear_fit(ok, key, unit)}")


if __name__ == "__main__":
    main()
