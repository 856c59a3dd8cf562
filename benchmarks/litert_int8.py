"""float32 against int8 weights and against int8 weights and activations,
in the LiteRT interpreter: test accuracy, file size and batch-1 latency of
a trained model, side by side in one run.

Usage:

    python benchmarks/litert_int8.py \\
        --model-path runs/efficient_capsnet_mnist/model.keras \\
        --data-dir ../shared/data/mnist --output results/litert_int8/x.json

Exports the model three times with
`keras_caps.export.export_inference_model(..., format="litert")`: float32;
`quantize="int8"` (TensorFlow's dynamic-range quantization: 8-bit weights
with per-channel scales, float32 activations, routing and squash); and
`quantize="int8"` with `representative_images` (`--calibration-images`
training images of the model's run, as `keras-caps export
--calibration-images` draws them: 8-bit activations wherever LiteRT has
int8 kernels, the divisions in float32). Then runs the exports through
`keras_caps.inference.ExportedClassifier` (the LiteRT interpreter) on the
whole MNIST-format test set read with NumPy. The Keras model's own test
accuracy is the reference. Latency: the median of `--repeats` single-image
calls per export, alternated between them so that all see the same
machine load. Writes a JSON record with the command, the hardware and
every number.
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
from keras_caps.export import export_inference_model
from keras_caps.inference import ExportedClassifier
from keras_caps.training.calibration_sample import calibration_images

_QUANTIZED = ("int8_weights", "int8_activations")


def _exports(model, calibration):
    """The three LiteRT exports of `model` in a new temporary folder:
    `({name: ExportedClassifier}, {name: file bytes})`."""
    folder = tempfile.mkdtemp()
    classifiers, sizes = {}, {}
    for name, quantize, representative in (
            ("float32", None, None), ("int8_weights", "int8", None),
            ("int8_activations", "int8", calibration)):
        path = os.path.join(folder, name)
        export_inference_model(model, path, format="litert",
                               quantize=quantize,
                               representative_images=representative)
        sizes[name] = os.path.getsize(os.path.join(path, "model.tflite"))
        classifiers[name] = ExportedClassifier(path)
    return classifiers, sizes


def main():
    parser = benchmark_arguments(__doc__.split("\n")[0], repeats=300)
    parser.add_argument("--calibration-images", type=int, default=500)
    args = parser.parse_args()
    check_new_output(parser, args)
    images, labels = mnist_test_set(args.data_dir)
    model = keras.saving.load_model(args.model_path)
    classifiers, sizes = _exports(model, calibration_images(
        args.model_path, images.shape[1:], args.calibration_images,
        data_dir=args.data_dir))
    predictors = {name: (lambda batch, c=classifier: c(batch)[c.score_name])
                  for name, classifier in classifiers.items()}
    predictions = {name: predicted_classes(predict, images, args.batch_size)
                   for name, predict in
                   {"keras": keras_scores(inference_model(model)),
                    **predictors}.items()}
    accuracy = {name: float((predicted == labels).mean())
                for name, predicted in predictions.items()}
    latency = alternated_latencies(predictors, images[:1], args.repeats)
    write_record(args.output, {
        **machine_record(),
        "model_path": os.path.abspath(args.model_path),
        "test_images": len(images),
        "calibration_images": args.calibration_images,
        "test_accuracy": accuracy,
        "points_lost": {name: 100 * (accuracy["float32"] - accuracy[name])
                        for name in _QUANTIZED},
        # Test images whose predicted class an int8 export changes.
        "changed_predictions": {
            name: int((predictions[name] != predictions["float32"]).sum())
            for name in _QUANTIZED},
        "file_bytes": sizes,
        "batch1_median_ms": {name: 1000 * value
                             for name, value in latency.items()},
        "repeats": args.repeats,
    })


if __name__ == "__main__":
    main()
