"""Side-by-side timing and peak memory of TensorFlow training steps.

Shared by the routing benchmarks. A step is a `tf.function` returning
`(value, gradients)`; the steps of the compared layers alternate, so load
from other processes hits all of them alike.
"""

import os
import time

# TensorFlow 2.21 keeps the CPU allocator statistics `peak_memory_mib`
# reads only with its BFC allocator; read when the allocator is first made.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

_MIB = 2.0**20


def make_step(layer, jit_compile=False):
    """A `tf.function` training step of `layer`: the sum of its outputs and
    the gradients with respect to the inputs and every trainable weight."""
    weights = [variable.value for variable in layer.trainable_variables]

    @tf.function(jit_compile=jit_compile)
    def step(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(layer(inputs))
        return loss, tape.gradient(loss, [inputs, *weights])

    return step


def sync(result):
    """Waits for a step's `(value, gradients)` to be computed."""
    value, gradients = result
    value.numpy()
    for gradient in gradients:
        gradient.numpy()


def time_steps(steps_by_name, inputs, warmup, steps):
    """`{name: (median ms, minimum ms)}` per step; the steps alternate."""
    for step in steps_by_name.values():
        for _ in range(warmup):
            sync(step(inputs))
    times = {name: [] for name in steps_by_name}
    for _ in range(steps):
        for name, step in steps_by_name.items():
            start = time.perf_counter()
            sync(step(inputs))
            times[name].append(time.perf_counter() - start)
    return {name: (1000.0 * float(np.median(values)),
                   1000.0 * float(np.min(values)))
            for name, values in times.items()}


def peak_memory_mib(step, inputs):
    """Peak MiB of the TF CPU allocator during one step, above the start."""
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    sync(step(inputs))
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
    return (peak - before) / _MIB
