"""`keras-caps export`: a saved model as a SavedModel (or, with
`--format`, an ONNX, LiteRT or OpenVINO model) serving raw images."""

import os

from keras_caps.cli.argument_types import positive_int


def add_export_command(commands):
    """Registers `export` and its handler on the subparsers `commands`."""
    # The same precisions as training's, from a module without TensorFlow.
    from keras_caps.export.export_support import EXPORT_FORMATS
    from keras_caps.inference import SERVING_PRECISIONS as PRECISIONS

    export = commands.add_parser(
        "export", help="Export a saved .keras model as a SavedModel (or an "
        "ONNX, LiteRT or OpenVINO model) that serves raw images (with the "
        "class names kept beside the model, class_names.json, if any).")
    export.add_argument("--model-path", required=True)
    export.add_argument("--export-dir", required=True)
    export.add_argument("--reconstruction", action="store_true",
                        help="Also serve the reconstruction.")
    export.add_argument("--overwrite", action="store_true",
                        help="Replace a previous keras-caps export at "
                        "--export-dir, holding only the files it wrote, "
                        "unchanged. Anything else there (a file, other "
                        "files in any subfolder, a changed file, a "
                        "SavedModel from elsewhere) is never replaced.")
    export.add_argument("--input-range", default="pixels",
                        choices=("pixels", "unit"),
                        help="What the served signature takes: pixels "
                        "(default), raw pixels in [0, 255] as the model "
                        "was trained on; unit, images in [0, 1], which the "
                        "signature multiplies by 255.")
    export.add_argument("--format", default="saved_model",
                        choices=EXPORT_FORMATS,
                        help="saved_model (default): a TensorFlow "
                        "SavedModel (TensorFlow or JAX backend, TensorFlow "
                        "installed); onnx: the folder holds model.onnx, "
                        "for ONNX Runtime (any of the TensorFlow, JAX and "
                        "PyTorch backends; pip install "
                        "'keras-caps[onnx]', or 'keras-caps[onnx-jax]' on "
                        "JAX); litert: model.tflite for the LiteRT "
                        "interpreter (TensorFlow backend; pip install "
                        "'keras-caps[litert]'); openvino: model.xml and "
                        "model.bin for OpenVINO's runtime (TensorFlow "
                        "backend; pip install 'keras-caps[openvino]').")
    export.add_argument("--quantize", default=None, choices=("int8",),
                        help="int8: store the weights in 8 bits with "
                        "per-channel scales (LiteRT's dynamic-range "
                        "quantization; with --format litert only); the "
                        "routing, the squash and the activations stay "
                        "float32. Recorded in keras_caps_export.json.")
    _add_calibration_arguments(export)
    export.add_argument("--precision", default=None, choices=PRECISIONS,
                        help="Precision of the served convolutions: "
                        "mixed_bfloat16 is faster on CPUs with "
                        "bfloat16 instructions. Defaults to the model's.")
    export.set_defaults(handler=run_export)


def _add_calibration_arguments(export):
    """`--calibration-images` and where its training images are read."""
    export.add_argument("--calibration-images", type=positive_int,
                        default=None, metavar="N",
                        help="With --quantize int8: also compute the "
                        "convolutions, dense layers and capsule votes in "
                        "8 bits, their activations calibrated on N images "
                        "drawn from the training data of the model's run "
                        "(its metrics.json; a few hundred is plenty). The "
                        "squash and the routing stay float32.")
    export.add_argument("--data-dir", default=None,
                        help="Where the run's training data is, for "
                        "--calibration-images (as for `train`).")
    export.add_argument("--no-download", dest="download",
                        action="store_false",
                        help="Never download the run's dataset for "
                        "--calibration-images.")


def run_export(args):
    """Exports `--model-path` to `--export-dir`. Returns 0."""
    from keras_caps.export import check_export_support
    from keras_caps.export import export_inference_model
    from keras_caps.export.export_support import check_quantize
    from keras_caps.inference import find_class_names
    from keras_caps.inference import load_model_file
    from keras_caps.runs import check_export_target

    if not os.path.exists(args.model_path):
        raise ValueError("No model at `--model-path`. Received: "
                         f"{args.model_path!r}")
    # What this backend and installation cannot write is refused before
    # the (slow) model load, with what to install or use instead.
    check_export_support(args.format, precision=args.precision)
    check_quantize(args.quantize, args.format)
    if args.calibration_images is not None and args.quantize != "int8":
        raise ValueError(
            "`--calibration-images` calibrates 8-bit activations: add "
            "`--quantize int8` (with `--format litert`). Received: "
            f"--calibration-images {args.calibration_images} without "
            "--quantize")
    _refuse_run_artifact(args.export_dir)
    # Checked before the (slow) model load as well as by the export.
    check_export_target(args.export_dir, overwrite=args.overwrite,
                        model_path=args.model_path)
    class_names = find_class_names(args.model_path)
    model = load_model_file(args.model_path, "--model-path")
    export_inference_model(model, args.export_dir,
                           reconstruction=args.reconstruction,
                           precision=args.precision,
                           overwrite=args.overwrite,
                           model_path=args.model_path,
                           input_range=args.input_range,
                           class_names=class_names, format=args.format,
                           quantize=args.quantize,
                           representative_images=_calibration(args, model))
    print(f"Exported the inference model to {args.export_dir}")
    return 0


def _calibration(args, model):
    """The `--calibration-images` sample of the run's training images (in
    the export's input range), or `None`."""
    if args.calibration_images is None:
        return None
    from keras_caps.model_roles import image_input
    from keras_caps.training.calibration_sample import calibration_images

    images = calibration_images(
        args.model_path, tuple(image_input(model).shape[1:]),
        args.calibration_images, data_dir=args.data_dir,
        download=args.download)
    return images / 255.0 if args.input_range == "unit" else images


def _refuse_run_artifact(export_dir):
    """Raises a `ValueError` if `export_dir` is a run's or a comparison's.

    A training run's `export/` (and anything in a comparison's folder) is
    written only by the `train` (`compare`) that owns it, never replaced
    by an export of another model, `--overwrite` or not.
    """
    # The owner detection of `--output` files; private there, shared here.
    from keras_caps.runs.output_files import _artifact_owner

    owner = _artifact_owner(export_dir)
    if owner is None:
        return
    command, folder = owner
    what = "training run" if command == "train" else "comparison"
    raise ValueError(
        f"Refusing to export to {export_dir!r}: it belongs to the {what} "
        f"in {folder!r}, which only `keras-caps {command}` writes. Choose "
        "another `--export-dir`.")
