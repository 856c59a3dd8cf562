"""Training and inference speed of EfficientCapsNet-MNIST, ours vs official.

Usage:

    python benchmarks/efficient_capsnet_benchmark.py [--rounds 3] [--steps 40]

Every measurement runs in its own subprocess (so peak memory is that
configuration's own), and the implementations alternate inside each round so
both see the same machine load. Reported numbers are medians over rounds of
the median step time over timed steps after warm-up.

"official" is a re-implementation of the official Efficient-CapsNet layers
(EscVM/Efficient-CapsNet, utils/layers.py) in the same Keras 3: a grouped
`Conv2D(groups=F)` for the primary capsules, `Reshape` and `Squash` layers
created inside `call`, `tf.norm` squash, and the self-attention routing that
builds the full N_in x N_in agreement matrix. Same architecture and the same
161,824 trainable parameters without the decoder.

The arithmetic of one training step is about 0.18 GFLOP per image (0.06
for inference). Each round also measures the machine's float32 matrix
throughput (a 1024x1024 matmul, in its own process); the table prints the
share of that arithmetic limit each of our steps reaches (near 100 % means
no faster float32 implementation of this architecture is possible here).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

GFLOP_PER_IMAGE = {"train": 0.18, "inference": 0.06}


def _official_style_model():
    import keras
    import tensorflow as tf

    class Squash(keras.layers.Layer):
        def call(self, s):
            n = tf.norm(s, axis=-1, keepdims=True)
            return (1 - 1 / (tf.math.exp(n) + 1e-20)) * (s / (n + 1e-20))

    class PrimaryCaps(keras.layers.Layer):
        def __init__(self, filters, kernel, num_capsules, dim, **kwargs):
            super().__init__(**kwargs)
            self.conv = keras.layers.Conv2D(filters, kernel, groups=filters)
            self.num_capsules, self.dim = num_capsules, dim

        def build(self, input_shape):
            self.conv.build(input_shape)

        def call(self, inputs):
            x = self.conv(inputs)
            x = keras.layers.Reshape((self.num_capsules, self.dim))(x)
            return Squash()(x)

        def compute_output_shape(self, input_shape):
            return (input_shape[0], self.num_capsules, self.dim)

    class FCCaps(keras.layers.Layer):
        def __init__(self, num_capsules, dim, **kwargs):
            super().__init__(**kwargs)
            self.num_capsules, self.dim = num_capsules, dim

        def build(self, input_shape):
            n_in, d_in = input_shape[-2], input_shape[-1]
            self.W = self.add_weight(
                shape=(self.num_capsules, n_in, d_in, self.dim),
                initializer="he_normal", name="W")
            self.b = self.add_weight(shape=(self.num_capsules, n_in, 1),
                                     initializer="zeros", name="b")

        def call(self, inputs):
            u = tf.einsum("...ji,kjiz->...kjz", inputs, self.W)
            c = tf.einsum("...ij,...kj->...i", u, u)[..., None]
            c = c / tf.sqrt(tf.cast(self.dim, tf.float32))
            c = tf.nn.softmax(c, axis=1) + self.b
            s = tf.reduce_sum(u * c, axis=-2)
            return Squash()(s)

        def compute_output_shape(self, input_shape):
            return (input_shape[0], self.num_capsules, self.dim)

    class Length(keras.layers.Layer):
        def call(self, inputs):
            return tf.sqrt(tf.reduce_sum(tf.square(inputs), -1) + 1e-7)

        def compute_output_shape(self, input_shape):
            return input_shape[:-1]

    class Mask(keras.layers.Layer):
        def call(self, inputs):
            capsules, mask = inputs
            return tf.reshape(capsules * mask[..., None], (-1, 160))

        def compute_output_shape(self, input_shape):
            return (input_shape[0][0], 160)

    images = keras.Input((28, 28, 1), name="image")
    labels = keras.Input((10,), name="label")
    x = keras.layers.Rescaling(1 / 255)(images)
    for filters, kernel, strides in ((32, 5, 1), (64, 3, 1), (64, 3, 1),
                                     (128, 3, 2)):
        x = keras.layers.Conv2D(filters, kernel, strides, activation="relu",
                                kernel_initializer="he_normal")(x)
        x = keras.layers.BatchNormalization()(x)
    x = PrimaryCaps(128, 9, 16, 8)(x)
    digit_caps = FCCaps(10, 16, name="digit_caps")(x)
    lengths = Length(name="length")(digit_caps)
    masked = Mask()([digit_caps, labels])
    decoder = keras.Sequential([
        keras.Input((160,)),
        keras.layers.Dense(512, activation="relu"),
        keras.layers.Dense(1024, activation="relu"),
        keras.layers.Dense(784, activation="sigmoid"),
        keras.layers.Reshape((28, 28, 1)),
    ], name="decoder")
    return keras.Model({"image": images, "label": labels},
                       {"length": lengths, "reconstruction": decoder(masked)})


def _build(implementation):
    import keras

    import keras_caps

    if implementation == "keras_caps":
        return keras_caps.applications.EfficientCapsNet("mnist")
    model = _official_style_model()
    model.compile(
        optimizer=keras.optimizers.Adam(5e-4),
        loss={"length": keras_caps.losses.MarginLoss(),
              "reconstruction": "mse"},
        loss_weights={"length": 1.0, "reconstruction": 0.392},
        metrics={"length": ["accuracy"]}, jit_compile=False)
    return model


def _worker(implementation, precision, mode, batch_size, steps):
    """Runs one measurement; prints one JSON line."""
    import keras
    import numpy as np
    import tensorflow as tf

    serving_precision = None
    if mode == "inference" and implementation == "keras_caps":
        # Built in float32, then served at `precision`.
        serving_precision, precision = precision, "float32"
    keras.config.set_dtype_policy(precision)
    model = _build(implementation)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size, 28, 28, 1)).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10, batch_size)]
    times = []
    if mode == "train":
        data = tf.data.Dataset.from_tensors(
            ({"image": images, "label": labels},
             {"length": labels, "reconstruction": images / 255})).repeat()

        class StepTimer(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                times.append(time.perf_counter() - self.start)

        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0,
                  callbacks=[StepTimer()])
    else:
        from keras_caps.applications import inference_model
        from keras_caps.applications import serving_model

        if implementation == "keras_caps":
            # What `keras-caps export` serves: batch norms folded; with
            # mixed_bfloat16 only the convolutions compute in bfloat16.
            inference = serving_model(model, precision=serving_precision)
        else:
            inference = inference_model(model)
        predict = tf.function(lambda x: inference(x, training=False))
        for _ in range(steps):
            start = time.perf_counter()
            predict(images).numpy()
            times.append(time.perf_counter() - start)
    warmup = max(5, steps // 4)
    step_seconds = statistics.median(times[warmup:])
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"step_ms": 1000 * step_seconds,
                      "images_per_second": batch_size / step_seconds,
                      "peak_mib": peak_mib}))


def _matmul_gflops(repeats=30, size=1024):
    """The float32 matrix throughput of this process, GFLOP/s (median)."""
    import tensorflow as tf

    a = tf.random.normal((size, size))
    matmul = tf.function(lambda x: tf.matmul(x, x))
    matmul(a).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a).numpy()
        times.append(time.perf_counter() - start)
    print(json.dumps({"gflops": 2 * size**3 / statistics.median(times) / 1e9}))


def _measure(implementation, precision, mode, batch_size, steps):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, __file__, "--worker", implementation, precision,
         mode, str(batch_size), str(steps)],
        capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--worker", nargs=5, default=None,
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        implementation, precision, mode, batch_size, steps = args.worker
        if mode == "matmul":
            _matmul_gflops()
            return
        _worker(implementation, precision, mode, int(batch_size), int(steps))
        return

    configurations = [("train", 16), ("train", 64), ("train", 128),
                      ("inference", 16), ("inference", 128),
                      ("inference", 256)]
    # (implementation, precision); the official code has no mixed precision.
    variants = [("keras_caps", "float32"), ("official", "float32"),
                ("keras_caps", "mixed_bfloat16")]
    results = {}
    for round_index in range(args.rounds):
        results.setdefault("matmul", []).append(_measure(
            "none", "float32", "matmul", 0, 0))
        for mode, batch_size in configurations:
            order = variants if round_index % 2 == 0 else variants[::-1]
            for implementation, precision in order:
                key = (implementation, precision, mode, batch_size)
                results.setdefault(key, []).append(_measure(
                    implementation, precision, mode, batch_size, args.steps))

    def median(key, field):
        return statistics.median(r[field] for r in results[key])

    machine_gflops = statistics.median(r["gflops"] for r in results["matmul"])
    print(f"EfficientCapsNet-MNIST, {os.cpu_count()} CPU cores, medians of "
          f"{args.rounds} rounds x {args.steps} steps (first quarter "
          f"discarded as warm-up); float32 matmul: {machine_gflops:.0f} "
          "GFLOP/s\n")
    header = (f"{'mode':<10}{'batch':>6}{'ours ms':>9}{'ours img/s':>12}"
              f"{'official ms':>13}{'speedup':>9}{'of limit':>10}"
              f"{'ours bf16 ms':>14}{'speedup':>9}{'ours MiB':>10}"
              f"{'official MiB':>14}")
    print(header)
    print("-" * len(header))
    for mode, batch_size in configurations:
        ours = median(("keras_caps", "float32", mode, batch_size), "step_ms")
        official = median(("official", "float32", mode, batch_size),
                          "step_ms")
        bf16 = median(("keras_caps", "mixed_bfloat16", mode, batch_size),
                      "step_ms")
        ours_mib = median(("keras_caps", "float32", mode, batch_size),
                          "peak_mib")
        official_mib = median(("official", "float32", mode, batch_size),
                              "peak_mib")
        limit_ms = (1000 * batch_size * GFLOP_PER_IMAGE[mode]
                    / machine_gflops)
        limit = f"{limit_ms / ours:.0%}"
        print(f"{mode:<10}{batch_size:>6}{ours:>9.1f}"
              f"{1000 * batch_size / ours:>12.0f}{official:>13.1f}"
              f"{official / ours:>8.2f}x{limit:>10}{bf16:>14.1f}"
              f"{official / bf16:>8.2f}x{ours_mib:>10.0f}"
              f"{official_mib:>14.0f}")
    print("\nspeedup: official float32 time / ours; 'of limit': the "
          "arithmetic limit's share of our float32 step time. bf16 training "
          "uses keras_caps' mixed_bfloat16 policy (float32 weights). Our "
          "inference is the exported serving model (batch norms folded into "
          "the next convolutions; bf16: its convolutions in bfloat16).")


if __name__ == "__main__":
    main()
