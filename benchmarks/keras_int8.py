"""float32 against int8 weights in Keras (`keras_caps.inference.
quantize_int8`): test accuracy, `.keras` file size and batch-1 latency of
a trained model, side by side in one run.

Usage:

    python benchmarks/keras_int8.py \\
        --model-path runs/matrix_capsnet_mnist/model.keras \\
        --data-dir ../shared/data/mnist --output results/litert_int8/x.json

For the models LiteRT cannot run (MatrixCapsNet routes 6-dimensional
tensors, beyond LiteRT's built-in kernels): the inference model is loaded
twice, the second copy quantized with `quantize_int8` (every capsule
layer's kernel stored in 8 bits with per-channel scales, read back as
`q * s` in float32; the routing and the EM statistics stay float32), both
run on the whole MNIST-format test set read with NumPy. Sizes: each
inference model saved as a `.keras` file. Latency: the median of
`--repeats` single-image `predict_on_batch` calls per model, alternated.
Writes a JSON record with the command, the hardware and every number.
"""

import os
import tempfile

import keras
from int8_measurement import alternated_latencies
from int8_measurement import benchmark_arguments
from int8_measurement import check_new_output
from int8_measurement import keras_scores
from int8_measurement import machine_record
from int8_measurement import mnist_test_set
from int8_measurement import predicted_classes
from int8_measurement import write_record

import keras_caps  # noqa: F401  (registers the layers for loading)
from keras_caps.applications import inference_model
from keras_caps.inference import quantize_int8


def _served(model_path, quantize):
    """The inference model of the file, its weights in int8 if asked,
    with the quantized layers' names."""
    served = inference_model(keras.saving.load_model(model_path))
    return served, (quantize_int8(served) if quantize else [])


def main():
    parser = benchmark_arguments(__doc__.split("\n")[0], repeats=100)
    args = parser.parse_args()
    check_new_output(parser, args)
    images, labels = mnist_test_set(args.data_dir)
    models, quantized, sizes = {}, {}, {}
    folder = tempfile.mkdtemp()
    for name in ("float32", "int8"):
        models[name], quantized[name] = _served(args.model_path,
                                                name == "int8")
        path = os.path.join(folder, f"{name}.keras")
        models[name].save(path)
        sizes[name] = os.path.getsize(path)
    predictions = {name: predicted_classes(keras_scores(served), images,
                                           args.batch_size)
                   for name, served in models.items()}
    accuracy = {name: float((predicted == labels).mean())
                for name, predicted in predictions.items()}
    latency = alternated_latencies(
        {name: keras_scores(served) for name, served in models.items()},
        images[:1], args.repeats)
    write_record(args.output, {
        **machine_record(),
        "runtime": f"Keras {keras.__version__}, "
                   f"{keras.backend.backend()} backend",
        "model_path": os.path.abspath(args.model_path),
        "test_images": len(images),
        "int8_layers": quantized["int8"],
        "test_accuracy": accuracy,
        "points_lost": {"int8": 100 * (accuracy["float32"]
                                       - accuracy["int8"])},
        "changed_predictions": {"int8": int(
            (predictions["int8"] != predictions["float32"]).sum())},
        "file_bytes": sizes,
        "batch1_median_ms": {name: 1000 * value
                             for name, value in latency.items()},
        "repeats": args.repeats,
    })


if __name__ == "__main__":
    main()
