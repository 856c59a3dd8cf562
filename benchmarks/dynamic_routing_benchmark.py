"""Forward+backward time and peak memory of `DynamicRouting` vs the Keras port.

Usage (TensorFlow backend; the baseline is TensorFlow code):

    python benchmarks/dynamic_routing_benchmark.py
    python benchmarks/dynamic_routing_benchmark.py --iterations 1 2 3 \\
        --steps 5 --jit_compile

For every iteration count, one training step (forward, `sum` of the
outputs, gradients with respect to the inputs and the kernel) runs inside a
`tf.function` for

- `keras_caps`: `keras_caps.layers.DynamicRouting`, votes computed once;
- `keras port`: a re-implementation, written for this benchmark, of the
  routing of `XifengGuo/CapsNet-Keras` (branch `tf2.2`, `CapsuleLayer`):
  inputs tiled `num_capsules` times, votes from a `tf.map_fn` over the
  batch of TF 1.13 `batch_dot` products, and `batch_dot`s with adjoint
  flags in every routing iteration.

Both use the same weights (the port's kernel is ours transposed), and the
script checks that their outputs and kernel gradients agree. Times are the
median (and minimum) of `--steps` timed steps after `--warmup` untimed
ones; the two implementations' steps alternate, so load from other
processes hits both alike. Peak memory is the TensorFlow CPU allocator's
peak during one step above what was in use before it
(`tf.config.experimental.get_memory_info`). A least-squares line through
time against iterations, with its worst residual, shows whether the cost
grows linearly.
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from side_by_side import peak_memory_mib  # noqa: E402
from side_by_side import time_steps  # noqa: E402

from keras_caps.layers import DynamicRouting  # noqa: E402

# --- The Keras port's routing, re-implemented ------------------------------


def _port_batch_dot(x, y, axes):
    """`batch_dot` with the TF 1.13 semantics the port relies on.

    The lower-rank operand gets trailing unit axes, the contraction is one
    `tf.matmul` whose adjoint flags pick the contracted axes, and the unit
    axes are squeezed away again.
    """
    x_ndim, y_ndim = len(x.shape), len(y.shape)
    diff = abs(x_ndim - y_ndim)
    if x_ndim < y_ndim:
        x = tf.reshape(x, tf.concat([tf.shape(x), [1] * diff], axis=0))
    elif y_ndim < x_ndim:
        y = tf.reshape(y, tf.concat([tf.shape(y), [1] * diff], axis=0))
    adjoint_x = axes[0] != len(x.shape) - 1
    adjoint_y = axes[1] == len(y.shape) - 1
    out = tf.matmul(x, y, adjoint_a=adjoint_x, adjoint_b=adjoint_y)
    if diff:
        start = x_ndim + y_ndim - 3 if x_ndim > y_ndim else x_ndim - 1
        out = tf.squeeze(out, list(range(start, start + diff)))
    return out


def _port_squash(vectors, axis=-1):
    squared_norm = tf.reduce_sum(tf.square(vectors), axis, keepdims=True)
    scale = (squared_norm / (1.0 + squared_norm)
             / tf.sqrt(squared_norm + keras.config.epsilon()))
    return scale * vectors


def port_routing(inputs, port_kernel, num_iterations):
    """Port routing; `port_kernel` is (J, I, D_out, D_in), as the port's W."""
    num_capsules = port_kernel.shape[0]
    # (batch, 1, I, D_in) tiled to (batch, J, I, D_in)
    tiled = tf.tile(tf.expand_dims(inputs, 1), [1, num_capsules, 1, 1])
    # One (J, I, D_in) x (J, I, D_out, D_in) product per example:
    # (batch, J, I, D_out)
    votes = tf.map_fn(lambda x: _port_batch_dot(x, port_kernel, [2, 3]),
                      elems=tiled)
    logits = tf.zeros([tf.shape(votes)[0], num_capsules, inputs.shape[1]])
    for iteration in range(num_iterations):
        couplings = tf.nn.softmax(logits, axis=1)  # over the J parents
        outputs = _port_squash(_port_batch_dot(couplings, votes, [2, 2]))
        if iteration < num_iterations - 1:
            logits += _port_batch_dot(outputs, votes, [2, 3])
    return outputs


# --- Measurement ------------------------------------------------------------


def _make_step(forward, kernel, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def step(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = forward(inputs)
            loss = tf.reduce_sum(outputs)
        gradients = tape.gradient(loss, [inputs, kernel])
        return outputs, gradients

    return step






def _linearity(iterations, times):
    """Least-squares line through (iterations, ms) and its worst residual."""
    if len(iterations) < 2:
        return None
    slope, intercept = np.polyfit(iterations, times, 1)
    fitted = slope * np.asarray(iterations) + intercept
    worst = float(np.max(np.abs(np.asarray(times) - fitted)))
    return slope, intercept, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_inputs", type=int, default=1152)
    parser.add_argument("--input_dim", type=int, default=8)
    parser.add_argument("--num_capsules", type=int, default=10)
    parser.add_argument("--capsule_dim", type=int, default=16)
    parser.add_argument("--iterations", type=int, nargs="+",
                        default=[1, 2, 3, 4, 5])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--jit_compile", action="store_true",
                        help="Compile both steps with XLA.")
    parser.add_argument("--skip_baseline", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    inputs = tf.constant(rng.normal(
        size=(args.batch_size, args.num_inputs, args.input_dim)).astype(
            "float32") * 0.1)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
          f"{os.cpu_count()} CPUs, jit_compile={args.jit_compile}")
    print(f"batch {args.batch_size}: {args.num_inputs} x {args.input_dim} "
          f"-> {args.num_capsules} x {args.capsule_dim}; forward+backward, "
          f"median of {args.steps} steps after {args.warmup} warm-up steps")
    header = (f"{'iters':>5} | {'keras_caps ms':>13} | {'(min)':>6} | "
              f"{'peak MiB':>8} | {'port ms':>8} | {'(min)':>6} | "
              f"{'peak MiB':>8} | {'port/ours':>9} | "
              f"{'max |diff| out, grad':>20}")
    print(header)
    print("-" * len(header))
    ours_times, port_times, ours_mins, port_mins = [], [], [], []
    for num_iterations in args.iterations:
        layer = DynamicRouting(args.num_capsules, args.capsule_dim,
                               num_iterations=num_iterations)
        layer.build(inputs.shape)
        steps = {"ours": _make_step(layer, layer.kernel.value,
                                    args.jit_compile)}
        if not args.skip_baseline:
            # The port's W is (J, I, D_out, D_in): ours (I, D_in, J, D_out)
            # transposed, so both compute the same function.
            port_kernel = tf.Variable(
                tf.transpose(layer.kernel.value, (2, 0, 3, 1)))
            steps["port"] = _make_step(
                lambda x, k=port_kernel, r=num_iterations: port_routing(
                    x, k, r),
                port_kernel, args.jit_compile)
        times = time_steps(steps, inputs, args.warmup, args.steps)
        ours_ms, ours_min = times["ours"]
        ours_times.append(ours_ms)
        ours_mins.append(ours_min)
        row = (f"{num_iterations:>5} | {ours_ms:>13.1f} | {ours_min:>6.1f} | "
               f"{peak_memory_mib(steps['ours'], inputs):>8.1f} | ")
        if args.skip_baseline:
            print(row)
            continue
        port_ms, port_min = times["port"]
        port_times.append(port_ms)
        port_mins.append(port_min)
        port_mib = peak_memory_mib(steps["port"], inputs)
        ours_out, (_, ours_grad) = steps["ours"](inputs)
        port_out, (_, port_grad) = steps["port"](inputs)
        port_grad = tf.transpose(port_grad, (1, 3, 0, 2))
        out_diff = float(tf.reduce_max(tf.abs(ours_out - port_out)))
        grad_diff = float(tf.reduce_max(tf.abs(ours_grad - port_grad)))
        print(row + f"{port_ms:>8.1f} | {port_min:>6.1f} | {port_mib:>8.1f} | "
              f"{port_ms / ours_ms:>8.2f}x | "
              f"{out_diff:>9.1e}, {grad_diff:>8.1e}")
    for name, times in (("keras_caps median", ours_times),
                        ("keras_caps min", ours_mins),
                        ("port median", port_times),
                        ("port min", port_mins)):
        fit = _linearity(args.iterations, times)
        if fit is None or not times:
            continue
        slope, intercept, worst = fit
        steps = np.diff(times)
        print(f"{name}: time ~ {intercept:.1f} + {slope:.1f} ms x iterations "
              f"(worst residual {worst:.1f} ms); per-iteration increments "
              f"{np.round(steps, 1).tolist()} ms")


if __name__ == "__main__":
    main()
