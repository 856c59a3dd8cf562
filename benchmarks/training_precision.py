"""Where a CPU spends a training step in each precision, layer by layer.

Usage:

    python benchmarks/training_precision.py [--model efficient_capsnet]
        [--dataset mnist] [--batch-size 32] [--repeats 5]

Builds the model under `float32`, `mixed_float16` and `mixed_bfloat16` in
one process and times, side by side (medians of `--repeats` after two
warm-up calls):

- one whole `train_on_batch` step on random images;
- each layer's forward and backward pass on its own, with the input shape
  it has in the model (the gradient with respect to its input and its
  weights, as training computes them);
- the optimizer's update of all the weights (Adam, wrapped in Keras'
  `LossScaleOptimizer` under `mixed_float16`, as the builders do).

Each 16-bit column is followed by its ratio to float32, so the layer that
makes a precision slow on this machine stands out. TensorFlow decides per
CPU which kernels run a float16 op: with oneDNN (the default on x86) it uses
oneDNN's float16 kernels only on CPUs with AVX512-FP16 or AMX-FP16 and
Eigen's otherwise, so run this on the host you care about. Setting
`TF_ENABLE_ONEDNN_OPTS=0` before the command shows the Eigen kernels on any
x86 host.
"""

import argparse
import functools
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_caps.applications import MODELS  # noqa: E402
from keras_caps.training.hardware import describe_hardware  # noqa: E402

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def _median_seconds(function, repeats):
    for _ in range(2):
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _random_batch(model, batch_size):
    """Inputs and targets for `train_on_batch`, as the application expects."""
    rng = np.random.default_rng(0)
    shape = tuple(model.inputs[0].shape[1:])
    classes = keras.tree.flatten(model.output)[0].shape[-1]
    images = rng.uniform(0, 255, (batch_size, *shape)).astype("float32")
    labels = np.eye(classes, dtype="float32")[
        rng.integers(0, classes, batch_size)]
    if "label" in {layer.name for layer in model.layers}:
        return ({"image": images, "label": labels},
                {"length": labels, "reconstruction": images / 255.0})
    return images, labels


def _layer_step(layer, batch_size):
    """A compiled forward + backward pass of `layer` alone, or `None`.

    Layers with several inputs (masks fed the labels) or without weights
    and with a single input shape of their own are timed all the same when
    they have one tensor input.
    """
    if not isinstance(layer.input, keras.KerasTensor):
        return None
    shape = (batch_size, *layer.input.shape[1:])
    inputs = tf.random.uniform(shape, dtype=layer.input.dtype)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = layer(inputs, training=True)
            loss = tf.add_n([tf.reduce_sum(tf.cast(output, "float32"))
                             for output in tf.nest.flatten(outputs)])
        return tape.gradient(loss, [inputs, *layer.trainable_variables])

    return step


def _convolution_kernels(layer, batch_size):
    """The three TensorFlow kernels of a Conv2D layer, timed one by one."""
    dtype = layer.compute_dtype
    input_shape = (batch_size, *layer.input.shape[1:])
    output_shape = (batch_size, *layer.output.shape[1:])
    inputs = tf.random.uniform(input_shape, dtype=dtype)
    kernel = tf.cast(layer.kernel, dtype)
    output_gradient = tf.random.uniform(output_shape, dtype=dtype)
    strides = (1, *layer.strides, 1)
    padding = layer.padding.upper()
    kernels = {
        "Conv2D": lambda: tf.nn.conv2d(inputs, kernel, strides, padding),
        "Conv2DBackpropInput": lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=input_shape, filter=kernel,
            out_backprop=output_gradient, strides=strides, padding=padding),
        "Conv2DBackpropFilter": lambda: tf.raw_ops.Conv2DBackpropFilter(
            input=inputs, filter_sizes=kernel.shape,
            out_backprop=output_gradient, strides=strides, padding=padding),
    }
    return {f"{layer.name}: {name} kernel only": tf.function(function)
            for name, function in kernels.items()}


def _optimizer_step(model):
    """One update of every trainable weight by the model's optimizer."""
    optimizer = model.optimizer
    variables = model.trainable_variables
    gradients = [tf.fill(variable.shape, 1e-3) for variable in variables]

    @tf.function
    def step():
        optimizer.apply(gradients, variables)

    return step


def measure(model_name, dataset, batch_size, repeats):
    """{row name: {precision: median seconds}} and the row order."""
    recipe = MODELS[model_name].family
    seconds = {}
    order = []
    previous = keras.config.dtype_policy()
    try:
        for precision in PRECISIONS:
            keras.config.set_dtype_policy(precision)
            keras.utils.set_random_seed(0)
            model = recipe.builder(dataset)
            x, y = _random_batch(model, batch_size)
            rows = {"whole train_on_batch step":
                    functools.partial(model.train_on_batch, x, y)}
            for layer in model.layers:
                step = _layer_step(layer, batch_size)
                if step is not None and not isinstance(
                        layer, keras.layers.InputLayer):
                    rows[f"{layer.name} ({type(layer).__name__})"] = step
            rows["optimizer update (Adam; loss-scaled under float16)"] = (
                _optimizer_step(model))
            for layer in model.layers:
                if isinstance(layer, keras.layers.Conv2D):
                    rows.update(_convolution_kernels(layer, batch_size))
            for name, function in rows.items():
                if name not in seconds:
                    order.append(name)
                seconds.setdefault(name, {})[precision] = _median_seconds(
                    function, repeats)
    finally:
        keras.config.set_dtype_policy(previous)
    return seconds, order


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="efficient_capsnet",
                        choices=sorted(MODELS))
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    seconds, order = measure(args.model, args.dataset, args.batch_size,
                             args.repeats)
    print(f"{args.model} on {args.dataset}, batch {args.batch_size}, "
          f"{describe_hardware()}, TensorFlow {tf.__version__}, oneDNN "
          f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')}; "
          f"medians of {args.repeats}")
    print()
    print("| forward + backward of | float32 ms | mixed_float16 ms | "
          "ratio | mixed_bfloat16 ms | ratio |")
    print("|---|---|---|---|---|---|")
    for name in order:
        row = seconds[name]
        base = row["float32"]
        cells = [f"{1000 * base:.2f}"]
        for precision in PRECISIONS[1:]:
            cells += [f"{1000 * row[precision]:.2f}",
                      f"{row[precision] / base:.1f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
