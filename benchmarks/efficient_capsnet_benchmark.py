"""Training and inference speed of EfficientCapsNet-MNIST, ours vs official.

Usage:

    git clone https://github.com/EscVM/Efficient-CapsNet /tmp/official
    python benchmarks/efficient_capsnet_benchmark.py \
        --official-dir /tmp/official [--rounds 3] [--steps 40] \
        [--repeats 30] [--profile]

The peer is the real official code (EscVM/Efficient-CapsNet, commit
4b337f5): its `utils/layers.py` (PrimaryCaps, FCCaps, Length, Mask),
`utils/tools.py` (marginLoss) and `models/efficient_capsnet_graph_mnist.py`
(the MNIST capsule graph and the training graph with its generator), read
from `--official-dir` and run in the same Keras 3 as ours. Three lines are
adapted because Keras 3 refuses them (`OFFICIAL_ADAPTATIONS`); nothing else
is changed.

Training: every (implementation, batch) runs in its own subprocess (so peak
memory is that configuration's own), the implementations alternating
inside each round; the official training graph is compiled as in its
`models/model.py` (Adam 5e-4, marginLoss + 0.392 x MSE). Reported: medians
over rounds of the median step time after warm-up.

Inference: one subprocess per round builds both models side by side and
interleaves repetitions of every variant at batch 16, 128 and 256, float32:
a compiled function `model(x, training=False)` with and without XLA
(`jit_compile`) and `model.predict_on_batch`. Ours is the image-to-scores
graph `inference_model(EfficientCapsNet("mnist"))`, batch norms NOT folded;
the official one is its capsule graph `efficient_capsnet_graph` (images in
0-1 to capsules and lengths; neither runs a decoder). Ours folded
(`serving_model`, float32) and served in mixed_bfloat16 are reported in
separate columns. Reported: medians and interquartile ranges over all
repetitions of all rounds.

`--profile` times, at batch 256 in one process, every layer's forward pass
alone on its real input (ours and theirs), and each layer's marginal cost
inside the whole graph (the graph up to that layer minus the graph up to
the layer before).

The arithmetic of one image is about 0.06 GFLOP for inference (0.18 for a
training step); each round measures the machine's float32 matrix
throughput (a 1024x1024 matmul) and the tables print the share of that
limit our float32 step reaches.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import types

GFLOP_PER_IMAGE = {"train": 0.18, "inference": 0.06}
TRAIN_BATCHES = (16, 64, 128)
INFERENCE_BATCHES = (16, 128, 256)

# (file, original text, adapted text): what Keras 3 requires of the official
# code, each line found exactly once.
OFFICIAL_ADAPTATIONS = (
    # Keras 3 asks layers for their output shape; the official FCCaps
    # answers with attributes it never sets.
    ("utils/layers.py", "return (None, self.C, self.L)",
     "return (None, self.N, self.D)"),
    # Keras 3 takes shapes as tuples and units as Python ints.
    ("models/efficient_capsnet_graph_mnist.py", "tf.keras.Input(16*10)",
     "tf.keras.Input((16*10,))"),
    ("models/efficient_capsnet_graph_mnist.py", "Dense(np.prod(input_shape)",
     "Dense(int(np.prod(input_shape))"),
)


# === The official code ===


def _load_official_module(official_dir, path, name):
    with open(os.path.join(official_dir, path)) as file:
        source = file.read()
    for adapted_path, original, adapted in OFFICIAL_ADAPTATIONS:
        if adapted_path != path:
            continue
        if source.count(original) != 1:
            raise RuntimeError(
                f"{path} of {official_dir} is not the official commit this "
                f"benchmark adapts: {original!r} not found once.")
        source = source.replace(original, adapted)
    module = types.ModuleType(name)
    module.__file__ = os.path.join(official_dir, path)
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def load_official(official_dir):
    """The official MNIST graph module and `utils.tools`, from the files.

    `utils/__init__.py` is skipped: it imports the plotting and dataset
    helpers, which the graphs do not use.
    """
    package = types.ModuleType("utils")
    package.__path__ = []
    sys.modules["utils"] = package
    package.layers = _load_official_module(official_dir, "utils/layers.py",
                                           "utils.layers")
    tools = _load_official_module(official_dir, "utils/tools.py",
                                  "utils.tools")
    graphs = _load_official_module(
        official_dir, "models/efficient_capsnet_graph_mnist.py",
        "efficient_capsnet_graph_mnist")
    return graphs, tools


# === Training (one subprocess per configuration) ===


def _train_model(implementation, official_dir):
    import keras

    import keras_caps

    if implementation == "keras_caps":
        return keras_caps.applications.EfficientCapsNet("mnist")
    graphs, tools = load_official(official_dir)
    model = graphs.build_graph([28, 28, 1], "train", False)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=5e-4),
                  loss=[tools.marginLoss, "mse"], loss_weights=[1.0, 0.392],
                  metrics={"Efficient_CapsNet": "accuracy"})
    return model


def _train_worker(implementation, batch_size, steps, official_dir):
    """Times `steps` training steps; prints one JSON line."""
    import keras
    import numpy as np
    import tensorflow as tf

    model = _train_model(implementation, official_dir)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size, 28, 28, 1)).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10, batch_size)]
    if implementation == "keras_caps":
        batch = ({"image": images, "label": labels},
                 {"length": labels, "reconstruction": images / 255})
    else:  # The official graph takes images in 0-1.
        batch = ((images / 255, labels), (labels, images / 255))
    data = tf.data.Dataset.from_tensors(batch).repeat()
    times = []

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0,
              callbacks=[StepTimer()])
    step_seconds = statistics.median(times[max(5, steps // 4):])
    print(json.dumps({
        "step_ms": 1000 * step_seconds,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


# === Inference (both models in one process) ===


def _inference_models(official_dir):
    """name -> (model, takes images in 0-1)."""
    import keras_caps
    from keras_caps.inference import inference_model
    from keras_caps.inference import serving_model

    ours = keras_caps.applications.EfficientCapsNet("mnist", compile=False)
    graphs, _ = load_official(official_dir)
    return {
        "ours": (inference_model(ours), False),
        "official": (graphs.efficient_capsnet_graph([28, 28, 1]), True),
        "ours_folded": (serving_model(ours, precision="float32"), False),
        "ours_folded_bf16": (serving_model(ours, precision="mixed_bfloat16"),
                             False),
    }


def _inference_callables(models):
    """(model name, way) -> (function, whether it takes images in 0-1)."""
    import tensorflow as tf

    callables = {}
    for name, (model, unit_range) in models.items():
        for way, jit in (("function", False), ("xla", True)):
            function = tf.function(
                lambda x, model=model: model(x, training=False),
                jit_compile=jit)
            callables[(name, way)] = (function, unit_range)
        if not name.startswith("ours_folded"):
            callables[(name, "predict_on_batch")] = (model.predict_on_batch,
                                                     unit_range)
    return callables


def _to_numpy(outputs):
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda t: t.numpy() if hasattr(t, "numpy") else t, outputs)


def _inference_worker(repeats, official_dir):
    """Interleaved repetitions of every variant; prints one JSON line."""
    import numpy as np
    import tensorflow as tf

    callables = _inference_callables(_inference_models(official_dir))
    keys = list(callables)
    times = {}
    for batch_size in INFERENCE_BATCHES:
        pixels = np.random.default_rng(0).uniform(
            0, 255, (batch_size, 28, 28, 1)).astype("float32")
        # Raw pixels for ours, 0-1 for the official graph, made untimed.
        inputs = {False: tf.constant(pixels), True: tf.constant(pixels / 255)}
        for function, unit_range in callables.values():  # Traces, warms up.
            for _ in range(3):
                _to_numpy(function(inputs[unit_range]))
        for repeat in range(repeats):
            for key in keys if repeat % 2 == 0 else keys[::-1]:
                function, unit_range = callables[key]
                start = time.perf_counter()
                _to_numpy(function(inputs[unit_range]))
                times.setdefault(f"{key[0]}|{key[1]}|{batch_size}", []).append(
                    1000 * (time.perf_counter() - start))
    print(json.dumps(times))


# === Layer-by-layer profile ===


def _layer_calls(model, images):
    """Per layer: (name, its forward alone, its real input, the graph up to
    it reduced to a scalar)."""
    import keras
    import tensorflow as tf

    calls, inputs = [], images
    for layer in model.layers[1:]:
        alone = tf.function(lambda x, layer=layer: layer(x, training=False))
        prefix = keras.Model(model.inputs, layer.output)
        calls.append((layer.name, alone, inputs, tf.function(
            lambda x, prefix=prefix: tf.reduce_sum(prefix(x, training=False)))))
        inputs = alone(inputs)
    return calls


def _profile(official_dir, repeats, batch_size=256):
    """Prints each layer's time alone and its marginal time in the graph;
    both models' layers are timed in turn within every repetition."""
    import numpy as np
    import tensorflow as tf

    models = _inference_models(official_dir)
    pixels = np.random.default_rng(0).uniform(
        0, 255, (batch_size, 28, 28, 1)).astype("float32")
    calls, times = {}, {}
    for name in ("ours", "official"):
        model, unit_range = models[name]
        images = tf.constant(pixels / 255 if unit_range else pixels)
        calls[name] = [(layer, alone, x, prefix, images)
                       for layer, alone, x, prefix in _layer_calls(model,
                                                                   images)]
    for repeat in range(repeats):
        for name in ("ours", "official")[::1 if repeat % 2 else -1]:
            for index, (_, alone, x, prefix, images) in enumerate(
                    calls[name]):
                for kind, function, argument in (("alone", alone, x),
                                                 ("prefix", prefix, images)):
                    function(argument)
                    start = time.perf_counter()
                    _to_numpy(function(argument))
                    times.setdefault((name, kind, index), []).append(
                        1000 * (time.perf_counter() - start))
    for name in ("ours", "official"):
        print(f"\n{name}, batch {batch_size}, ms (medians of {repeats})")
        print(f"{'layer':<24}{'alone':>9}{'in graph':>10}")
        previous = 0.0
        for index, (layer, *_) in enumerate(calls[name]):
            prefix = statistics.median(times[(name, "prefix", index)])
            alone = statistics.median(times[(name, "alone", index)])
            print(f"{layer:<24}{alone:>9.2f}{prefix - previous:>10.2f}")
            previous = prefix
        print(f"{'whole graph':<24}{'':>9}{previous:>10.2f}")


# === Driver ===


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


def _subprocess(official_dir, *arguments):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, __file__, "--official-dir", official_dir,
         "--worker", *map(str, arguments)],
        capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _run_worker(arguments, official_dir):
    kind, *rest = arguments
    if kind == "matmul":
        _matmul_gflops()
    elif kind == "train":
        _train_worker(rest[0], int(rest[1]), int(rest[2]), official_dir)
    else:
        _inference_worker(int(rest[0]), official_dir)


def _quartiles(values):
    q1, median, q3 = statistics.quantiles(values, n=4)
    return median, q1, q3


def _print_training(train, gflops, args):
    print(f"\nTraining, medians of {args.rounds} rounds x {args.steps} "
          "steps (first quarter discarded as warm-up)\n")
    header = (f"{'batch':>6}{'ours ms':>9}{'official ms':>13}{'speedup':>9}"
              f"{'of limit':>10}{'ours MiB':>10}{'official MiB':>14}")
    print(header + "\n" + "-" * len(header))
    for batch_size in TRAIN_BATCHES:
        ours, official = (
            statistics.median(r["step_ms"] for r in train[(impl, batch_size)])
            for impl in ("keras_caps", "official"))
        ours_mib, official_mib = (
            statistics.median(r["peak_mib"] for r in train[(impl, batch_size)])
            for impl in ("keras_caps", "official"))
        limit = 1000 * batch_size * GFLOP_PER_IMAGE["train"] / gflops / ours
        print(f"{batch_size:>6}{ours:>9.1f}{official:>13.1f}"
              f"{official / ours:>8.2f}x{limit:>10.0%}{ours_mib:>10.0f}"
              f"{official_mib:>14.0f}")


def _print_inference(inference, gflops, args):
    print(f"\nInference, float32 unless marked, ms: median [quartiles] of "
          f"{args.rounds} rounds x {args.repeats} interleaved repetitions\n")
    columns = [("ours", "function"), ("official", "function"),
               ("ours", "xla"), ("official", "xla"),
               ("ours", "predict_on_batch"), ("official", "predict_on_batch"),
               ("ours_folded", "function"), ("ours_folded_bf16", "function")]
    for batch_size in INFERENCE_BATCHES:
        stats = {c: _quartiles(inference[f"{c[0]}|{c[1]}|{batch_size}"])
                 for c in columns}
        limit = (1000 * batch_size * GFLOP_PER_IMAGE["inference"] / gflops
                 / stats[("ours", "function")][0])
        print(f"batch {batch_size} (ours at {limit:.0%} of the float32 "
              "arithmetic limit)")
        for name, way in columns:
            median, q1, q3 = stats[(name, way)]
            official = stats[("official", "xla" if way == "xla" else
                              "predict_on_batch" if way == "predict_on_batch"
                              else "function")][0]
            print(f"  {name + ' ' + way:<30}{median:>8.1f} [{q1:.1f}, "
                  f"{q3:.1f}]  official / this: {official / median:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--official-dir", required=True,
                        help="a checkout of github.com/EscVM/Efficient-CapsNet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    official_dir = os.path.abspath(args.official_dir)
    if args.worker:
        _run_worker(args.worker, official_dir)
        return
    if args.profile:
        _profile(official_dir, args.repeats)
        return
    gflops, train, inference = [], {}, {}
    for round_index in range(args.rounds):
        gflops.append(_subprocess(official_dir, "matmul")["gflops"])
        order = ("keras_caps", "official")[::1 if round_index % 2 else -1]
        for batch_size in () if args.skip_training else TRAIN_BATCHES:
            for implementation in order:
                train.setdefault((implementation, batch_size), []).append(
                    _subprocess(official_dir, "train", implementation,
                                batch_size, args.steps))
        for key, values in _subprocess(official_dir, "inference",
                                       args.repeats).items():
            inference.setdefault(key, []).extend(values)
    machine = statistics.median(gflops)
    print(f"EfficientCapsNet-MNIST against the official code, "
          f"{os.cpu_count()} CPU cores; float32 matmul: {machine:.0f} GFLOP/s")
    if train:
        _print_training(train, machine, args)
    _print_inference(inference, machine, args)
    print("\nspeedup: official time / ours. Ours unfolded is "
          "inference_model(EfficientCapsNet('mnist')); 'folded' is the "
          "exported serving model (batch norms folded into the next "
          "convolutions), bf16 its convolutions in bfloat16.")


if __name__ == "__main__":
    main()
