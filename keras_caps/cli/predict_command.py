"""`keras-caps predict`: the top classes of image files.

    keras-caps predict runs/cats/model.keras photos/ extra.png --top-k 3
    keras-caps predict exported/cats "photos/*.jpg" --json
    keras-caps predict runs/cats/model.keras photos/ \
        --reconstruction reconstructions.png

MODEL is a `.keras` file or an export folder written by `keras-caps
export`: a SavedModel (which needs TensorFlow), an ONNX, a LiteRT or an
OpenVINO model (each run in its own runtime). Images are read as in
training on a folder of images (`keras_caps.inference.image_files`):
converted to the model's channels and resized to its input size with
PIL's bilinear filter. Class names come from `--class-names` (a JSON list
or a text file with one name per line), else from `class_names.json`
beside the `.keras` file or `assets.extra/class_names.json` inside the
export, else the class indices are printed.
"""

import json
import os
import sys

import numpy as np

from keras_caps.cli.argument_types import positive_int

PREDICT_MARK = "keras-caps predict"
"""The `written_by` mark of the reconstruction PNG files predict writes."""

_GAP = 2  # pixels between an input and its reconstruction, and between rows


def add_predict_command(commands):
    """Registers `predict` and its handler on the subparsers `commands`."""
    predict = commands.add_parser(
        "predict", help="Classify image files with a trained model: the "
        "top classes and their scores per image.",
        description=__doc__.split("\n\n", 2)[2])
    predict.add_argument("model", metavar="MODEL",
                         help="A .keras file or a SavedModel export folder.")
    predict.add_argument("images", metavar="IMAGE", nargs="+",
                         help="Image files (PNG, JPEG, BMP, GIF), folders "
                         "(their image files, subfolders included) or glob "
                         "patterns (quote them).")
    predict.add_argument("--top-k", type=positive_int, default=3,
                         help="Classes shown per image. Defaults to 3.")
    predict.add_argument("--json", action="store_true",
                         help="Print a JSON list, one object per image, "
                         "instead of a table.")
    predict.add_argument("--class-names", default=None, metavar="FILE",
                         help="A JSON list of class names, or a text file "
                         "with one per line, in class-index order. "
                         "Defaults to class_names.json beside the .keras "
                         "file (assets.extra/class_names.json in an "
                         "export), else class indices.")
    predict.add_argument("--reconstruction", default=None, metavar="PNG",
                         help="Also write a PNG of each image (left) and "
                         "its reconstruction from the predicted class "
                         "capsule (right), one row per image: models with "
                         "a decoder (an export written with "
                         "--reconstruction). An existing file is replaced "
                         "only if keras-caps predict wrote it.")
    predict.add_argument("--batch-size", type=positive_int, default=32,
                         help="Images read and run at once.")
    predict.add_argument("--no-resize", dest="resize", action="store_false",
                         help="Refuse images whose size differs from the "
                         "model's input instead of resizing them.")
    predict.set_defaults(handler=run_predict)


def run_predict(args):
    """Prints the top classes of each image. Returns 0."""
    from keras_caps.inference import find_image_paths
    from keras_caps.inference import predict_images
    from keras_caps.runs.output_files import check_output_path

    if args.reconstruction is not None:
        check_output_path(args.reconstruction, PREDICT_MARK,
                          "--reconstruction")
    paths = find_image_paths(args.images)  # Before the (slow) model load.
    class_names = _class_names(args)
    records = predict_images(
        _load_model(args.model), paths, top_k=args.top_k,
        class_names=class_names, batch_size=args.batch_size,
        resize=args.resize, reconstruction=args.reconstruction is not None)
    if args.json:
        print(json.dumps([_json_record(record) for record in records],
                         indent=1))
    else:
        print(format_table(records))
    if args.reconstruction is not None:
        _write_reconstructions(args.reconstruction, records)
        print(f"Wrote {args.reconstruction}",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def format_table(records):
    """The records of `predict_images` as a text table, one row per image.

    Example:

    >>> print(format_table([{"path": "a.png", "top_k": [("cat", 0.9)]}]))
    image  top 1
    a.png  cat (0.900)
    """
    num_columns = max(len(record["top_k"]) for record in records)
    header = ["image"] + [f"top {k + 1}" for k in range(num_columns)]
    rows = [[record["path"]] + [f"{name} ({score:.3f})"
                                for name, score in record["top_k"]]
            for record in records]
    widths = [max(len(row[column]) for row in [header] + rows
                  if column < len(row))
              for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths))
        .rstrip() for row in [header] + rows)


def _class_names(args):
    from keras_caps.inference import find_class_names
    from keras_caps.inference import read_class_names

    if args.class_names is not None:
        return read_class_names(args.class_names, "--class-names")
    if not os.path.exists(args.model):
        return None  # _load_model names the missing model.
    return find_class_names(args.model)


def _load_model(path):
    from keras_caps.inference import ExportedClassifier
    from keras_caps.inference import load_model_file

    if os.path.isdir(path):
        return ExportedClassifier(path, "MODEL")
    return load_model_file(path, "MODEL")


def _json_record(record):
    return {"path": record["path"],
            "top_k": [{"class": name, "score": score}
                      for name, score in record["top_k"]],
            "scores": record["scores"]}


def _write_reconstructions(path, records):
    """A PNG, one row per image: the input, then its reconstruction."""
    from PIL import Image
    from PIL import PngImagePlugin

    from keras_caps.runs.atomic_files import write_atomically
    from keras_caps.runs.output_files import WRITTEN_BY
    from keras_caps.runs.output_files import check_output_path

    height, width, channels = records[0]["image"].shape
    canvas = np.zeros((len(records) * (height + _GAP) - _GAP,
                       2 * width + _GAP, channels), "uint8")
    for row, record in enumerate(records):
        top = row * (height + _GAP)
        canvas[top:top + height, :width] = record["image"]
        canvas[top:top + height, width + _GAP:] = np.rint(
            record["reconstruction"] * 255.0).astype("uint8")
    image = Image.fromarray(canvas[:, :, 0] if channels == 1 else canvas,
                            "L" if channels == 1 else "RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text(WRITTEN_BY, PREDICT_MARK)
    # Checked again: the file may have appeared while the model ran.
    check_output_path(path, PREDICT_MARK, "--reconstruction")
    write_atomically(path, lambda temporary: image.save(
        temporary, "PNG", pnginfo=info))
