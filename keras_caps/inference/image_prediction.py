"""Classifying image files with a trained model: `predict_images`.

The image reader, `keras_caps.inference.image_files` (Pillow), is imported
where it is used: `import keras_caps` imports this package, and Pillow
only when an image is read.
"""

import glob
import os

import keras
import numpy as np

from keras_caps import model_roles as roles
from keras_caps.inference.class_names import check_class_names
from keras_caps.inference.class_names import find_class_names
from keras_caps.inference.exported_classifier import ExportedClassifier

_COLOR_MODES = {1: "grayscale", 3: "rgb"}


def predict_images(model, paths, *, top_k=5, class_names=None, batch_size=32,
                   resize=True, reconstruction=False):
    """The top classes of image files, with their scores.

    Each image is read with `keras_caps.inference.image_files.read_image`,
    as for training on a folder of images: converted to the model's channel
    count (1: grayscale, 3: RGB) and, with `resize=True`, resized to the
    model's input size with PIL's bilinear filter. The model gets raw pixels
    (float32 in [0, 255]) and scales them itself. Images are read and run
    `batch_size` at a time.

    Args:
        model: a model from a keras_caps application builder or
            `keras-caps train` (its training graph, with or without a label
            input, or its inference model), an `ExportedClassifier`, or the
            path of a `.keras` file or of a SavedModel export folder.
        paths: a path or a list of them: image files, folders (their image
            files, subfolders included, sorted by path) and glob patterns
            (`"photos/*.jpg"`, `"photos/**/*.png"`).
        top_k: int >= 1. Classes per image (at most the number of classes).
        class_names: list of str, one per class, or None: the names kept
            with a `model` given as a path (`find_class_names`), else the
            class indices as strings (`"0"`, `"1"`, ...).
        batch_size: int >= 1. Images read and run at once.
        resize: bool. Resize images to the model's input size; with
            `False`, an image of another size is an error.
        reconstruction: bool. Also return each image as the model saw it
            and the decoder's reconstruction from the predicted capsule.

    Returns:
        list of dicts, one per image in `paths` order: `"path"` (str),
        `"top_k"` (list of `(class name, score)`, best first) and
        `"scores"` (list of floats, one per class: the model's class scores,
        capsule lengths for capsule networks, logits or probabilities for
        the others). With `reconstruction=True`, also `"image"` (uint8
        `(height, width, channels)`) and `"reconstruction"` (float32 in
        [0, 1], same shape).

    Raises:
        ValueError: no image matched `paths` (naming them), an unreadable
            image or one of the wrong size (naming the file), a model that
            is not a keras_caps classifier, an input that is not 1 or 3
            channels, `class_names` of the wrong length, or
            `reconstruction=True` for a model without a decoder.
        FileNotFoundError: a path without glob characters does not exist.

    Example:

    >>> records = predict_images(  # doctest: +SKIP
    ...     "runs/cats/model.keras", ["photos/"], top_k=2,
    ...     class_names=["cat", "dog"])
    >>> records[0]["top_k"]  # doctest: +SKIP
    [('cat', 0.93), ('dog', 0.08)]
    """
    _check_positive_int("top_k", top_k)
    _check_positive_int("batch_size", batch_size)
    if class_names is None and isinstance(model, (str, os.PathLike)):
        class_names = find_class_names(model)
    scorer = _Scorer(model, reconstruction)
    image_files = find_image_paths(paths)
    num_classes = scorer.num_classes
    names = ([str(index) for index in range(num_classes)]
             if class_names is None else check_class_names(class_names))
    if len(names) != num_classes:
        raise ValueError(
            f"`class_names` must name the model's {num_classes} classes; "
            f"received {len(names)} names: {names[:10]}")
    records = []
    for start in range(0, len(image_files), batch_size):
        batch_files = image_files[start:start + batch_size]
        images = np.stack([scorer.read(path, resize)
                           for path in batch_files])
        outputs = scorer(images)
        for index, path in enumerate(batch_files):
            scores = outputs[scorer.score_name][index]
            records.append(_record(path, scores, names, top_k))
            if reconstruction:
                records[-1]["image"] = images[index].astype("uint8")
                records[-1]["reconstruction"] = _one_image(
                    outputs[roles.RECONSTRUCTION][index])
    return records


def find_image_paths(paths):
    """The image files that `paths` name, in order, each once.

    Args:
        paths: a path or a list of them: files (taken whatever their
            extension), folders (their image files, subfolders included,
            sorted) and glob patterns (the image files they match;
            `**` matches subfolders).

    Returns:
        list of str.

    Raises:
        FileNotFoundError: a path without glob characters does not exist.
        ValueError: no image file at all; the message lists `paths`.

    Example:

    >>> find_image_paths(["photos/", "more/*.png"])  # doctest: +SKIP
    ['photos/a.jpg', 'photos/b.png', 'more/c.png']
    """
    from keras_caps.inference.image_files import is_image_file
    from keras_caps.inference.image_files import list_image_files

    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(path) for path in paths]
    found = []
    for path in paths:
        if os.path.isdir(path):
            found.extend(list_image_files(path, recursive=True))
        elif os.path.isfile(path):
            found.append(path)
        elif glob.has_magic(path):
            for match in sorted(glob.glob(path, recursive=True)):
                if os.path.isdir(match):
                    found.extend(list_image_files(match, recursive=True))
                elif is_image_file(match):
                    found.append(match)
        else:
            raise FileNotFoundError(f"No image file or folder {path!r}.")
    found = list(dict.fromkeys(found))
    if not found:
        raise ValueError(
            f"No image files matched {paths}: expected image files "
            "(.png, .jpg, .jpeg, .bmp, .gif), folders holding some, or glob "
            "patterns matching some.")
    return found


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be a positive int; received "
                        f"{value!r} of type {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"`{name}` must be a positive int; received "
                         f"{value!r}.")


def _record(path, scores, names, top_k):
    scores = np.asarray(scores, dtype="float64")
    best = np.argsort(-scores, kind="stable")[:top_k]
    return {"path": path,
            "top_k": [(names[index], float(scores[index])) for index in best],
            "scores": [float(score) for score in scores]}


def _one_image(reconstructed):
    """A reconstruction `(height, width, channels)` in [0, 1]; several
    objects' reconstructions (MultiMNIST) are added and clipped."""
    reconstructed = np.asarray(reconstructed, dtype="float32")
    if reconstructed.ndim == 4:  # (objects, height, width, channels)
        reconstructed = reconstructed.sum(axis=0)
    return np.clip(reconstructed, 0.0, 1.0)


class _Scorer:
    """Raw images -> `{score name: scores[, "reconstruction": images]}`."""

    def __init__(self, model, reconstruction):
        if isinstance(model, (str, os.PathLike)):
            model = _load(model)
        if isinstance(model, ExportedClassifier):
            self._init_export(model, reconstruction)
        else:
            self._init_keras(model, reconstruction)
        if len(self.image_shape) != 3 or None in self.image_shape[:2]:
            raise ValueError(
                "`predict_images` needs a model with a fixed input size "
                "(height, width, channels); received input shape "
                f"{self.image_shape}.")
        channels = self.image_shape[2]
        if channels not in _COLOR_MODES:
            raise ValueError(
                "`predict_images` reads images as grayscale (1 channel) or "
                f"RGB (3 channels); the model takes {channels} channels "
                f"(input shape {self.image_shape}).")
        self.color_mode = _COLOR_MODES[channels]

    def _init_export(self, classifier, reconstruction):
        if reconstruction and not classifier.has_reconstruction:
            raise ValueError(
                f"The SavedModel {classifier.path!r} serves no "
                "reconstruction: export it with `keras-caps export "
                "--reconstruction` (a model with a decoder), or predict "
                "without reconstructions.")
        self.image_shape = classifier.image_shape
        self.score_name = classifier.score_name
        self.num_classes = classifier.num_classes
        self._run = classifier

    def _init_keras(self, model, reconstruction):
        from keras_caps.inference.inference_model import inference_model
        from keras_caps.inference.model_file_loading import (
            check_application_model,
        )

        check_application_model(model, "model")
        scores = roles.class_scores_layer(model)
        self.score_name = scores.name
        images = roles.image_input(model)
        if reconstruction:
            names = {layer.name for layer in model.layers}
            if not {roles.MASK, roles.DECODER, roles.LENGTH} <= names:
                raise ValueError(
                    "Reconstructions need a capsule network with a decoder "
                    f"(layers {roles.MASK!r} and {roles.DECODER!r}); the "
                    f"model {model.name!r} has none: it was built without "
                    "reconstruction, or its family has no decoder.")
            graph = inference_model(model, reconstruction=True)
        else:
            graph = keras.Model(images, {self.score_name: scores.output})
        self.image_shape = tuple(images.shape[1:])
        self.num_classes = scores.output.shape[-1]
        self._run = graph.predict_on_batch

    def read(self, path, resize):
        """The image at `path` as float32 pixels of the model's shape."""
        from keras_caps.inference.image_files import read_image

        height, width = self.image_shape[:2]
        image = read_image(path, image_size=(height, width) if resize
                           else None, color_mode=self.color_mode)
        if image.shape[:2] != (height, width):
            raise ValueError(
                f"The image {path!r} is {image.shape[0]}x{image.shape[1]} "
                f"(height x width) but the model takes {height}x{width}; "
                "resize it, or predict with resizing on.")
        return image.astype("float32")

    def __call__(self, images):
        outputs = self._run(images)
        return {name: np.asarray(value) for name, value in outputs.items()}


def _load(path):
    from keras_caps.inference.model_file_loading import load_model_file

    if os.path.isdir(path):
        return ExportedClassifier(path)
    return load_model_file(os.fspath(path), "model")
