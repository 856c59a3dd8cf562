"""Forward+backward time and peak memory of `VectorRouting` (issue 6).

Usage:

    python benchmarks/vector_routing_benchmark.py --peer-dir ~/peers
    KERAS_BACKEND=jax python benchmarks/vector_routing_benchmark.py \\
        --peer-dir ~/peers
    python benchmarks/vector_routing_benchmark.py --sizes 10000 40000 \\
        --million 0 --eager_max_inputs 40000 --steps 3 --no_peer

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

The peer is the reference PyTorch implementation itself
(`glassroom/heinsen_routing`, `EfficientVectorRouting`, memory-efficient,
the same sizes and iterations), run in the same way in its own subprocess
in the same run: one step is `sum(routing(x)).backward()` (gradients of all
its weights), eager PyTorch as published. Its code is not part of this
repository: clone it outside it and pass `--peer-dir` (see
`benchmarks/peer_code.py`; `--no_peer` times ours alone). Every process
pins the same intra-op thread count, `--threads` (TensorFlow's intra-op
pool, `torch.set_num_threads`; JAX's CPU client has no such setting), and
the measurements are interleaved over `--rounds` rounds (each round runs
every mode at every size once), so load from other processes hits all of
them alike; the table shows the medians over the rounds and, at each
size, the speed-up (peer time / ours) and our memory as a share of the
peer's.

The growth exponents are least-squares slopes of
log(time) and log(memory) against log(num_inputs) over the sizes run; the
local exponent between the two largest sizes is printed too, because a
constant overhead (compilation, the runtime) flattens the overall fit.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from peer_code import import_peer
from peer_code import missing_peer_message
from peer_code import peer_folder
from peer_code import pin_tensorflow_threads
from peer_code import pin_torch_threads

PEER = "heinsen_routing"
MODES = ("efficient", "eager", "peer")

_MIB = 2.0**20
NUM_CAPSULES, DIM, NUM_ITERATIONS = 32, 64, 2


def _proc_status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024.0  # kB -> bytes
    raise RuntimeError(f"{field} not in /proc/self/status")


def _ours_step(args):
    """`(run, num_parameters, backend)`: one compiled training step."""
    import keras
    import numpy as np

    from keras_caps.layers import VectorRouting

    backend = keras.backend.backend()
    if backend == "tensorflow":
        pin_tensorflow_threads(args.threads)
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
            return float(loss)
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
            return float(loss)
    else:
        raise ValueError("The benchmark runs on the tensorflow and jax "
                         f"backends. Received: backend={backend!r}")
    return run, layer.count_params(), backend


def _peer_step(args):
    """`(run, num_parameters, backend)` of the reference PyTorch layer."""
    import_peer(args.peer_dir, PEER)
    import numpy as np
    import torch
    from heinsen_routing import EfficientVectorRouting

    pin_torch_threads(args.threads)
    torch.manual_seed(0)
    routing = EfficientVectorRouting(
        n_inp=args.num_inputs, n_out=NUM_CAPSULES, d_inp=DIM, d_out=DIM,
        n_iters=NUM_ITERATIONS, memory_efficient=True)
    x = torch.from_numpy(np.random.default_rng(0).normal(
        size=(1, args.num_inputs, DIM)).astype("float32"))

    def run():
        routing.zero_grad(set_to_none=True)
        loss = routing(x).sum()
        loss.backward()
        return float(loss.detach())

    count = sum(p.numel() for p in routing.parameters())
    return run, count, f"torch {torch.__version__}"


def _worker(args):
    """Runs one (mode, num_inputs) measurement; prints one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    make = _peer_step if args.mode == "peer" else _ours_step
    run, num_parameters, backend = make(args)
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
        "mode": args.mode, "num_inputs": args.num_inputs,
        "backend": backend, "time_ms": 1e3 * float(np.median(times)),
        "min_ms": 1e3 * float(np.min(times)),
        "memory_mib": (peak - idle) / _MIB,
        "loss_finite": bool(np.isfinite(loss)),
        "num_parameters": num_parameters}))


def _measure(mode, num_inputs, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker",
               "--mode", mode, "--num_inputs", str(num_inputs),
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--threads", str(args.threads)]
    if args.peer_dir:
        command += ["--peer-dir", args.peer_dir]
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


def _median_row(runs):
    """The median over rounds of one (mode, num_inputs)'s measurements."""
    good = [run for run in runs if "error" not in run]
    if not good:
        return runs[-1]
    row = dict(good[0])
    for key in ("time_ms", "min_ms", "memory_mib"):
        row[key] = statistics.median(run[key] for run in good)
    row["rounds"] = len(good)
    return row


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


def _parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 40_000, 160_000, 640_000])
    parser.add_argument("--million", type=int, default=1_000_000,
                        help="One extra efficient-mode size; 0 to skip.")
    parser.add_argument("--eager_max_inputs", type=int, default=160_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3,
                        help="Interleaved repetitions; medians over them.")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="Intra-op threads of every process.")
    parser.add_argument("--peer-dir", dest="peer_dir",
                        default=os.environ.get("KERAS_CAPS_PEER_DIR"),
                        help="Folder holding a clone of "
                             "glassroom/heinsen_routing (see peer_code.py).")
    parser.add_argument("--no_peer", action="store_true",
                        help="Time ours alone; no ratios.")
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--num_inputs", type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


def _plan(args):
    """The (mode, num_inputs) pairs of one round, in order."""
    plan = []
    for num_inputs in sorted(args.sizes) + (
            [args.million] if args.million else []):
        for mode in MODES:
            if mode == "eager" and (num_inputs > args.eager_max_inputs
                                    or num_inputs == args.million):
                continue
            if mode == "peer" and args.no_peer:
                continue
            plan.append((mode, num_inputs))
    return plan


def _run_rounds(args):
    """`{(mode, num_inputs): median row}` over interleaved rounds."""
    plan = _plan(args)
    runs = {key: [] for key in plan}
    for round_number in range(args.rounds):
        for mode, num_inputs in plan:
            row = _measure(mode, num_inputs, args)
            runs[(mode, num_inputs)].append(row)
            print(f"  round {round_number + 1}:", json.dumps(row),
                  flush=True)
    return {key: _median_row(rows) for key, rows in runs.items()}


def _cells(row):
    if row is None:
        return "", ""
    if "error" in row:
        return "failed", "failed"
    return f"{row['time_ms']:.0f}", f"{row['memory_mib']:.0f}"


def _print_table(results):
    sizes = sorted({n for _, n in results})
    header = (f"{'num_inputs':>10} | {'ours ms':>8} | {'ours MiB':>8} | "
              f"{'eager ms':>8} | {'eager MiB':>9} | {'peer ms':>8} | "
              f"{'peer MiB':>8} | {'speed-up':>8} | {'memory':>6}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        ours, eager, peer = (results.get((mode, n)) for mode in MODES)
        cells = [*_cells(ours), *_cells(eager), *_cells(peer)]
        ratio = memory = ""
        if ours and peer and "error" not in ours and "error" not in peer:
            ratio = f"{peer['time_ms'] / ours['time_ms']:.2f}x"
            memory = f"{ours['memory_mib'] / peer['memory_mib']:.0%}"
        print(f"{n:>10} | {cells[0]:>8} | {cells[1]:>8} | {cells[2]:>8} | "
              f"{cells[3]:>9} | {cells[4]:>8} | {cells[5]:>8} | "
              f"{ratio:>8} | {memory:>6}")
    for row in results.values():
        if "error" in row:
            print(f"  {row['mode']} at {row['num_inputs']}: {row['error']}")
    print("speed-up: peer ms / ours ms; memory: ours MiB / peer MiB "
          "(medians over the rounds).")


def _print_growth(results):
    for mode in MODES:
        rows = [results[key] for key in sorted(results)
                if key[0] == mode and "error" not in results[key]]
        if len(rows) < 2:
            continue
        span = f"{rows[0]['num_inputs']} -> {rows[-1]['num_inputs']}"
        time_fit, time_local = _exponent(rows, "time_ms")
        memory_fit, memory_local = _exponent(rows, "memory_mib")
        print(f"{mode:>9} growth exponents over {span}: time "
              f"{time_fit:.2f} (largest two sizes {time_local:.2f}), memory "
              f"{memory_fit:.2f} (largest two sizes {memory_local:.2f})")
        if len(rows) >= 3:
            for key, unit in (("time_ms", "ms"), ("memory_mib", "MiB")):
                print(f"          {_linear_fit(rows, key, unit)}")


def main():
    args = _parse_args()
    if args.worker:
        _worker(args)
        return
    if not args.no_peer and peer_folder(args.peer_dir, PEER) is None:
        raise SystemExit(missing_peer_message(args.peer_dir, PEER))
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    print(f"VectorRouting forward+backward, backend={backend}, batch 1, "
          f"input_dim = capsule_dim = {DIM}, num_capsules = {NUM_CAPSULES}, "
          f"{NUM_ITERATIONS} iterations, fixed num_inputs; median of "
          f"{args.steps} steps after {args.warmup} warm-up, median over "
          f"{args.rounds} interleaved round(s); {args.threads} intra-op "
          f"threads; memory = peak RSS above the idle process; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")
    if not args.no_peer:
        print(f"peer: glassroom/heinsen_routing EfficientVectorRouting "
              f"(PyTorch, eager) from {peer_folder(args.peer_dir, PEER)}")
    results = _run_rounds(args)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    _print_table(results)
    print()
    _print_growth(results)


if __name__ == "__main__":
    main()
