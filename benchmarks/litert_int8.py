"""float32 against int8 weights, in the LiteRT interpreter: test accuracy,
file size and batch-1 latency of a trained model, side by side in one run.

Usage:

    python benchmarks/litert_int8.py \\
        --model-path runs/efficient_capsnet_mnist/model.keras \\
        --data-dir ../shared/data/mnist --output results/litert_int8/x.json

Exports the model twice with `keras_caps.export.export_inference_model(...,
format="litert")`, without and with `quantize="int8"` (TensorFlow's
dynamic-range quantization: 8-bit weights with per-channel scales,
float32 activations, routing and squash), then runs both exports through
`keras_caps.inference.ExportedClassifier` (the LiteRT interpreter) on the
whole MNIST-format test set read with NumPy. The Keras model's own test
accuracy is the reference. Latency: the median of `--repeats` single-image
calls per export, alternated between the two so that both see the same
machine load. Writes a JSON record with the command, the hardware and
every number.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import keras
import numpy as np

import keras_caps  # noqa: F401  (registers the layers for loading)
from keras_caps.applications import inference_model
from keras_caps.datasets import idx
from keras_caps.export import export_inference_model
from keras_caps.inference import ExportedClassifier


def _predictions(predict, images, batch_size):
    """The predicted class of every image."""
    return np.concatenate([
        np.argmax(predict(images[start:start + batch_size]), axis=-1)
        for start in range(0, len(images), batch_size)])


def _latencies(classifiers, image, repeats):
    """Median seconds of one single-image call per classifier, the calls
    alternated between them."""
    times = {name: [] for name in classifiers}
    for classifier in classifiers.values():
        classifier(image)  # Warm-up.
    for _ in range(repeats):
        for name, classifier in classifiers.items():
            start = time.perf_counter()
            classifier(image)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    if os.path.exists(args.output):
        parser.error(f"--output {args.output!r} exists; choose a new file")

    images, labels = idx.read_idx_dataset(args.data_dir)["test"]
    images = images[..., None].astype("float32")
    model = keras.saving.load_model(args.model_path)
    served = inference_model(model)
    score_name = served.output_names[0]

    def keras_scores(batch):
        outputs = served.predict_on_batch(batch)
        return outputs[score_name] if isinstance(outputs, dict) else outputs

    folder = tempfile.mkdtemp()
    classifiers, sizes = {}, {}
    for name, quantize in (("float32", None), ("int8", "int8")):
        path = os.path.join(folder, name)
        export_inference_model(model, path, format="litert",
                               quantize=quantize)
        sizes[name] = os.path.getsize(os.path.join(path, "model.tflite"))
        classifiers[name] = ExportedClassifier(path)
    predictions = {"keras": _predictions(keras_scores, images,
                                         args.batch_size)}
    for name, classifier in classifiers.items():
        predictions[name] = _predictions(
            lambda batch, c=classifier: c(batch)[c.score_name], images,
            args.batch_size)
    accuracy = {name: float(np.mean(predicted == labels))
                for name, predicted in predictions.items()}
    latency = _latencies(classifiers, images[:1], args.repeats)
    record = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "model_path": os.path.abspath(args.model_path),
        "test_images": len(images),
        "test_accuracy": accuracy,
        "int8_points_lost": 100 * (accuracy["float32"] - accuracy["int8"]),
        # Test images whose predicted class the int8 export changes.
        "int8_changed_predictions": int(np.sum(
            predictions["int8"] != predictions["float32"])),
        "file_bytes": sizes,
        "batch1_median_ms": {name: 1000 * value
                             for name, value in latency.items()},
        "repeats": args.repeats,
        "hardware": {"machine": platform.machine(),
                     "processor": platform.processor(),
                     "cpus": os.cpu_count()},
        "versions": {"keras": keras.__version__,
                     "python": platform.python_version()},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "x", encoding="utf-8") as file:
        json.dump(record, file, indent=2)
        file.write("\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
