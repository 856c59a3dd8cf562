"""Training speed and peak memory of InvertedAttentionCapsNet on CIFAR-10.

Usage:

    python benchmarks/inverted_attention_capsnet_benchmark.py \\
        --peer-dir ~/peers
    python benchmarks/inverted_attention_capsnet_benchmark.py \\
        --peer-dir ~/peers --batch_size 32 --steps 4 --warmup 2 \\
        --rounds 1 --jit_compile 0 1

Rows (each measurement in its own subprocess, so its peak memory is its
own):

- `model train`: one `model.fit` step of the CIFAR-10 model (ResNet backbone,
  2 concurrent routing iterations, 1,828,817 parameters; SGD, cross-entropy)
  on a fixed synthetic batch of raw images, as the builder compiles it
  (`jit_compile` from `--jit_compile`). Time: median step time over
  `--steps` timed steps after `--warmup` untimed ones (the first traces and
  compiles).
- `conv caps 1 fwd+bwd`: the first convolutional capsule layer alone
  (32 -> 32 types, 3x3, stride 2, 16x16 -> 7x7, 4x4 poses, 2 iterations):
  `sum(outputs)` and its gradients with respect to the inputs and weights
  in a `tf.function(jit_compile=...)`. Alone, the layer runs its own
  second (agreement) pass, which materialises the votes of every window
  (7,225,344 values per example); inside the model's concurrent stack with
  2 iterations the convolutional layers only run the uniform pass, which
  `InvertedAttentionRouting` computes without the votes.

Memory: the peak resident set size of the process (`VmHWM`, everything:
Python, TensorFlow, model, data and the step), and the part above the
resident size just before the first step.

The peer is the official PyTorch code itself (Tsai et al., 2020,
`yaohungt/Capsules-Inverted-Attention-Routing`: `CapsModel` with
`configs/resnet_backbone_CIFAR10.json`, concurrent routing, the same number
of iterations, SGD with momentum 0.9 and weight decay 5e-4, cross-entropy,
as its `main_capsule.py`; and its `CapsuleCONV` for the layer row), run in
the same run in its own subprocesses, in float32 whatever `--precision`.
Its code is not part of this repository: clone it outside it and pass
`--peer-dir` (see `benchmarks/peer_code.py`; `--no_peer` times ours alone).
It runs unmodified but for one shim: its `torch.einsum` results are made
contiguous, because its `.view` calls fail on PyTorch 2's non-contiguous
einsum outputs (a copy of each, small next to the einsums themselves).
Every process pins the same intra-op thread count, `--threads`
(TensorFlow's intra-op pool, `torch.set_num_threads`), and the rows are
interleaved over `--rounds` rounds (each round measures every row once),
so load from other processes hits all of them alike; the table shows the
medians over the rounds, the speed-up (peer s/step / ours) and our peak
memory as a share of the peer's. The target (issue 5) is at least 3x
faster with at most half the memory.
"""

import argparse
import json
import math
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

PEER = "Capsules-Inverted-Attention-Routing"
_GB = 1e9


def _proc_status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return float(line.split()[1]) * 1024.0  # kB -> bytes
    raise RuntimeError(f"{field} not in /proc/self/status")


def _model_worker(args):
    import keras
    import numpy as np
    import tensorflow as tf

    pin_tensorflow_threads(args.threads)

    from keras_caps.applications import InvertedAttentionCapsNet

    keras.config.set_dtype_policy(args.precision)
    keras.utils.set_random_seed(0)
    model = InvertedAttentionCapsNet(
        "cifar10", backbone=args.backbone,
        num_iterations=args.num_iterations, jit_compile=bool(args.jit))
    rng = np.random.default_rng(0)
    shape = (args.batch_size, 32, 32, 3)
    images = rng.uniform(0, 255, shape).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10,
                                                      args.batch_size)]
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    times, cpu_times = [], []

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()
            self.cpu_start = time.process_time()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)
            cpu_times.append(time.process_time() - self.cpu_start)

    idle = _proc_status("VmRSS")
    history = model.fit(data, steps_per_epoch=args.warmup + args.steps,
                        epochs=1, verbose=0, callbacks=[StepTimer()])
    peak = _proc_status("VmHWM")
    return {"step_s": statistics.median(times[args.warmup:]),
            "cpu_s": statistics.median(cpu_times[args.warmup:]),
            "peak_gb": peak / _GB, "above_idle_gb": (peak - idle) / _GB,
            "num_parameters": sum(int(np.prod(w.shape))
                                  for w in model.trainable_weights),
            "loss_finite": bool(np.isfinite(history.history["loss"][-1]))}


def _layer_worker(args):
    import keras
    import numpy as np
    import tensorflow as tf

    pin_tensorflow_threads(args.threads)

    from keras_caps.layers import InvertedAttentionRouting

    keras.config.set_dtype_policy(args.precision)
    layer = InvertedAttentionRouting(32, 16, kernel_size=3, strides=2,
                                     num_iterations=args.num_iterations)
    shape = (args.batch_size, 16, 16, 32, 16)
    layer.build(shape)
    x = tf.constant(np.random.default_rng(0).normal(size=shape),
                    dtype=layer.compute_dtype)

    @tf.function(jit_compile=bool(args.jit))
    def step(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(tf.cast(layer(inputs), "float32"))
        return loss, tape.gradient(loss,
                                   [inputs] + layer.trainable_variables)

    idle = _proc_status("VmRSS")
    for _ in range(args.warmup):
        step(x)
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        loss, _ = step(x)
        loss = float(loss)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = _proc_status("VmHWM")
    return {"step_s": statistics.median(times),
            "cpu_s": statistics.median(cpu_times), "peak_gb": peak / _GB,
            "above_idle_gb": (peak - idle) / _GB,
            "num_parameters": sum(int(np.prod(w.shape))
                                  for w in layer.trainable_weights),
            "loss_finite": bool(np.isfinite(loss))}


class _ContiguousEinsum:
    """`torch`, but `einsum` returns contiguous tensors.

    The official layers call `.view` on `torch.einsum` results; PyTorch 2
    may return them non-contiguous, and `.view` then fails. Handing the
    official module this stand-in for its `torch` (one copy of each
    einsum result) lets its code run unmodified.
    """

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def einsum(self, *args, **kwargs):
        return self._torch.einsum(*args, **kwargs).contiguous()


def _peer_modules(args):
    """The official code's modules and PyTorch, pinned to `--threads`."""
    folder = import_peer(args.peer_dir, PEER)
    import torch
    from src import capsule_model
    from src import layers

    layers.torch = _ContiguousEinsum(torch)
    pin_torch_threads(args.threads)
    torch.manual_seed(0)
    return folder, torch, capsule_model, layers


def _torch_times(step, args):
    """Median wall and CPU seconds of `step()` and the peak memory."""
    idle = _proc_status("VmRSS")
    for _ in range(args.warmup):
        step()
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        loss = step()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    peak = _proc_status("VmHWM")
    return {"step_s": statistics.median(times),
            "cpu_s": statistics.median(cpu_times), "peak_gb": peak / _GB,
            "above_idle_gb": (peak - idle) / _GB,
            "loss_finite": bool(math.isfinite(loss))}


def _peer_model_worker(args):
    """One training step of the official CIFAR-10 model, as its script."""
    folder, torch, capsule_model, _ = _peer_modules(args)
    config = os.path.join(folder, "configs",
                          f"{args.backbone}_backbone_CIFAR10.json")
    with open(config) as file:
        params = json.load(file)
    net = capsule_model.CapsModel(32, params, args.backbone, 0.0,
                                  args.num_iterations,
                                  sequential_routing=False)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9,
                                weight_decay=5e-4)
    loss_function = torch.nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, 32, 32)
    labels = torch.randint(0, 10, (args.batch_size,))

    def step():
        optimizer.zero_grad()
        loss = loss_function(net(images), labels)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    result = _torch_times(step, args)
    result["num_parameters"] = sum(p.numel() for p in net.parameters()
                                   if p.requires_grad)
    return result


def _peer_layer_worker(args):
    """The official `CapsuleCONV` (32 -> 32 types, 3x3, stride 2, 4x4
    poses) with `--num_iterations` passes, forward and backward."""
    _, torch, _, layers = _peer_modules(args)
    layer = layers.CapsuleCONV(32, 16, 32, 16, kernel_size=3, stride=2,
                               matrix_pose=True, dp=0.0)
    # The official layout: (batch, types, height, width, capsule_dim).
    x = torch.randn(args.batch_size, 32, 16, 16, 16, requires_grad=True)

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        outputs = layer(x, 0)
        for iteration in range(args.num_iterations - 1):
            outputs = layer(x, iteration, outputs)
        loss = outputs.sum()
        loss.backward()
        return float(loss.detach())

    result = _torch_times(step, args)
    result["num_parameters"] = sum(p.numel() for p in layer.parameters())
    return result


WORKERS = {"model": _model_worker, "layer": _layer_worker,
           "peer_model": _peer_model_worker,
           "peer_layer": _peer_layer_worker}
LABELS = {"model": "model train", "layer": "conv caps 1 fwd+bwd",
          "peer_model": "official model train",
          "peer_layer": "official conv caps 1"}


def _measure(what, jit, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", what,
               "--jit", str(jit), "--batch_size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--precision", args.precision, "--backbone", args.backbone,
               "--num_iterations", str(args.num_iterations),
               "--threads", str(args.threads)]
    if args.peer_dir:
        command += ["--peer-dir", args.peer_dir]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            check=False)
    lines = [line for line in result.stdout.splitlines()
             if line.startswith("{")]
    if result.returncode != 0 or not lines:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {result.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def _parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3,
                        help="Interleaved repetitions; medians over them.")
    parser.add_argument("--jit_compile", type=int, nargs="+", default=[0],
                        help="0 and/or 1: XLA for the model and the layer")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--backbone", default="resnet")
    parser.add_argument("--num_iterations", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="Intra-op threads of every process.")
    parser.add_argument("--peer-dir", dest="peer_dir",
                        default=os.environ.get("KERAS_CAPS_PEER_DIR"),
                        help="Folder holding a clone of yaohungt/"
                             "Capsules-Inverted-Attention-Routing.")
    parser.add_argument("--no_peer", action="store_true",
                        help="Time ours alone; no ratios.")
    parser.add_argument("--skip_layer", action="store_true")
    parser.add_argument("--worker", choices=tuple(WORKERS),
                        help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=0,
                        help=argparse.SUPPRESS)
    return parser.parse_args()


def _plan(args):
    """The (row, jit) pairs of one round, in order."""
    plan = []
    for what in ("model",) + (() if args.skip_layer else ("layer",)):
        plan += [(what, jit) for jit in args.jit_compile]
        if not args.no_peer:
            plan.append(("peer_" + what, 0))
    return plan


def _run_rounds(args):
    """`[row]`: each row's medians over the interleaved rounds."""
    plan = _plan(args)
    runs = {key: [] for key in plan}
    for round_number in range(args.rounds):
        for what, jit in plan:
            result = _measure(what, jit, args)
            runs[(what, jit)].append(result)
            print(f"  round {round_number + 1}: {what} jit={jit}",
                  json.dumps(result), flush=True)
    rows = []
    for (what, jit), results in runs.items():
        good = [r for r in results if "error" not in r]
        row = {"what": what, "jit": jit, "rounds": len(good)}
        if not good:
            row["error"] = results[-1]["error"]
        else:
            for key in ("step_s", "cpu_s", "peak_gb", "above_idle_gb"):
                row[key] = statistics.median(r[key] for r in good)
            row["num_parameters"] = good[0]["num_parameters"]
        rows.append(row)
    return rows


def _ratio_cells(row, rows):
    """Speed-up and memory share against the peer's row of the same kind,
    and whether the target (>= 3x faster, <= half the memory) is met."""
    if row["what"].startswith("peer_"):
        return ""
    peer = next((r for r in rows if r["what"] == "peer_" + row["what"]),
                None)
    if peer is None or "error" in peer:
        return ""
    speed_up = peer["step_s"] / row["step_s"]
    memory = row["peak_gb"] / peer["peak_gb"]
    met = speed_up >= 3.0 and memory <= 0.5
    return (f" {speed_up:>8.2f}x {memory:>9.2f}"
            + ("  target met" if met else "  target MISSED"))


def _print_table(rows, args):
    header = (f"{'row':<22} {'jit':>3} {'trainable':>10} {'s/step':>7} "
              f"{'img/s':>6} {'CPU s':>6} {'peak GB':>8} {'+run GB':>8} "
              f"{'speed-up':>9} {'mem ratio':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        start = f"{LABELS[row['what']]:<22} {row['jit']:>3}"
        if "error" in row:
            print(f"{start} {row['error']}")
            continue
        print(f"{start} {row['num_parameters']:>10,} "
              f"{row['step_s']:>7.2f} "
              f"{args.batch_size / row['step_s']:>6.1f} "
              f"{row['cpu_s']:>6.2f} "
              f"{row['peak_gb']:>8.2f} {row['above_idle_gb']:>8.2f}"
              + _ratio_cells(row, rows))
    print("speed-up: official s/step / ours; mem ratio: our peak / the "
          "official peak (whole processes); medians over the rounds.")


def main():
    args = _parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    if not args.no_peer and peer_folder(args.peer_dir, PEER) is None:
        raise SystemExit(missing_peer_message(args.peer_dir, PEER))
    print(f"InvertedAttentionCapsNet CIFAR-10 ({args.backbone} backbone, "
          f"{args.num_iterations} concurrent iterations), batch "
          f"{args.batch_size}, {args.precision} (the official code: "
          f"float32), median of {args.steps} steps after {args.warmup} "
          f"warm-up, medians over {args.rounds} interleaved round(s), "
          f"{args.threads} intra-op threads; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not args.no_peer:
        print(f"official code: {peer_folder(args.peer_dir, PEER)}")
    rows = _run_rounds(args)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    _print_table(rows, args)


if __name__ == "__main__":
    main()
