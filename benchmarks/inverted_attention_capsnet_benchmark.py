"""Training speed and peak memory of InvertedAttentionCapsNet on CIFAR-10.

Usage:

    python benchmarks/inverted_attention_capsnet_benchmark.py
    python benchmarks/inverted_attention_capsnet_benchmark.py \\
        --batch_size 32 --steps 4 --warmup 2 --rounds 1 --jit_compile 0 1

Rows (each measurement in its own subprocess, so its peak memory is its
own; the table shows the median over `--rounds`):

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

The issue's reference (the official PyTorch model, same architecture and
parameter count, measured on this 2-core CPU machine kind): about 20 s per
training step at batch 32 and a peak of 5.4 GB. The target is at least 3x
faster (<= 6.7 s/step) with at most half the memory (<= 2.7 GB).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REFERENCE_STEP_SECONDS = 20.0
REFERENCE_PEAK_GB = 5.4
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


def _measure(what, jit, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", what,
               "--jit", str(jit), "--batch_size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--precision", args.precision, "--backbone", args.backbone,
               "--num_iterations", str(args.num_iterations)]
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jit_compile", type=int, nargs="+", default=[0],
                        help="0 and/or 1: XLA for the model and the layer")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--backbone", default="resnet")
    parser.add_argument("--num_iterations", type=int, default=2)
    parser.add_argument("--skip_layer", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=0,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker = _model_worker if args.worker == "model" else _layer_worker
        print(json.dumps(worker(args)))
        return

    whats = ["model"] + ([] if args.skip_layer else ["layer"])
    rows = []
    for what in whats:
        for jit in args.jit_compile:
            results = [_measure(what, jit, args)
                       for _ in range(args.rounds)]
            good = [r for r in results if "error" not in r]
            row = {"what": what, "jit": jit}
            if not good:
                row["error"] = results[-1]["error"]
            else:
                for key in ("step_s", "cpu_s", "peak_gb", "above_idle_gb"):
                    row[key] = statistics.median(r[key] for r in good)
                row["num_parameters"] = good[0]["num_parameters"]
            rows.append(row)

    print(f"InvertedAttentionCapsNet CIFAR-10 ({args.backbone} backbone, "
          f"{args.num_iterations} concurrent iterations), batch "
          f"{args.batch_size}, {args.precision}, median of {args.steps} "
          f"steps after {args.warmup} warm-up, {args.rounds} round(s)")
    header = (f"{'row':<22} {'jit':>3} {'trainable':>10} {'s/step':>7} "
              f"{'img/s':>6} {'CPU s':>6} {'peak GB':>8} {'+run GB':>8} "
              f"{'speed-up':>9} {'mem ratio':>9}")
    print(header)
    print("-" * len(header))
    for row in rows:
        label = ("model train" if row["what"] == "model"
                 else "conv caps 1 fwd+bwd")
        start = f"{label:<22} {row['jit']:>3}"
        if "error" in row:
            print(f"{start} {row['error']}")
            continue
        line = (f"{start} {row['num_parameters']:>10,} "
                f"{row['step_s']:>7.2f} "
                f"{args.batch_size / row['step_s']:>6.1f} "
                f"{row['cpu_s']:>6.2f} "
                f"{row['peak_gb']:>8.2f} {row['above_idle_gb']:>8.2f}")
        if row["what"] == "model":
            speed_up = REFERENCE_STEP_SECONDS / row["step_s"]
            memory = row["peak_gb"] / REFERENCE_PEAK_GB
            line += f" {speed_up:>8.1f}x {memory:>9.2f}"
            met = speed_up >= 3.0 and memory <= 0.5
            line += "  target met" if met else "  target MISSED"
        print(line)
    print(f"Reference (official PyTorch, issue 5): "
          f"{REFERENCE_STEP_SECONDS:.0f} s/step "
          f"({32 / REFERENCE_STEP_SECONDS:.1f} img/s), peak "
          f"{REFERENCE_PEAK_GB} GB; target >= 3x faster, <= 0.5 of the "
          "memory.")


if __name__ == "__main__":
    main()
