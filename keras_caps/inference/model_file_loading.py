"""Loading a saved `.keras` model with errors that say what is wrong."""

import os
import zipfile

import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.layers import VectorRouting


@keras_caps_export("keras_caps.inference.load_model_file")
def load_model_file(path, argument_name="path", require_application=True):
    """`keras.saving.load_model(path)`, with clear errors for bad files.

    Importing `keras_caps` registers its layers, losses and metrics with
    Keras, so its `.keras` files load without `custom_objects`; Keras itself
    cannot find them in a process that never imported `keras_caps`. This
    function (used by `keras-caps evaluate`, `export` and `plot`) tells
    apart what can go wrong:

    - no file at `path` (or a folder);
    - a file that is not a `.keras` archive: truncated, or something else;
    - an archive holding classes that no imported package registered;
    - with `require_application=True`, a Keras model that was not built by
      a keras_caps application builder (see `check_application_model`: a
      `Sequential`, or a model without an `image` input or whose
      `length`, `logits` or `probabilities` class scores are not its
      output).

    Args:
        path: str. The `.keras` file.
        argument_name: str. The argument named in error messages, e.g.
            `"--model-path"`. Defaults to `"path"`.
        require_application: bool. Also check that the model comes from a
            keras_caps application builder. Defaults to `True`.

    Returns:
        The loaded `keras.Model`.

    Raises:
        ValueError: one of the cases above, naming `argument_name`, the
            path and what was expected.

    Example:

    >>> load_model_file("runs/missing.keras", "--model-path")
    Traceback (most recent call last):
    ...
    ValueError: No model at `--model-path`. Received: ...
    """
    if path is None or not os.path.exists(path):
        raise ValueError(f"No model at `{argument_name}`. Received: "
                         f"{argument_name}={path!r}")
    if os.path.isdir(path):
        raise ValueError(
            f"`{argument_name}` must be a .keras file, not a folder (a "
            "SavedModel export cannot be loaded as a Keras model). "
            f"Received: {argument_name}={path!r}")
    problem = _archive_problem(path)
    if problem:
        raise ValueError(
            f"`{argument_name}` is not a readable .keras file: {problem}. "
            "Expected a zip archive written by `model.save(...)` or "
            "`keras-caps train`. Received: "
            f"{argument_name}={path!r} ({os.path.getsize(path)} bytes)")
    try:
        model = keras.saving.load_model(path)
    except TypeError as error:
        if "Could not locate" not in str(error):
            raise
        raise ValueError(
            f"`{argument_name}` holds a class that no imported package "
            "registered with Keras: "
            f"{str(error).split('. Make sure', 1)[0]}. keras_caps layers "
            "load once `keras_caps` is imported; import the package that "
            f"defines the others. Received: {argument_name}={path!r}"
        ) from None
    if require_application:
        check_application_model(model, argument_name, path)
    return model


def check_application_model(model, argument_name="model", path=None):
    """Raises unless `model` comes from a keras_caps application builder.

    A model of an application builder (or `keras-caps train`) is a
    functional graph whose class scores, the one layer named in
    `model_roles.CLASS_SCORE_LAYERS`, are an output of the model, and which
    reads images from an input named `model_roles.IMAGE` (or, for
    `VectorRoutingHead` on a user's backbone, computes the scores with a
    keras_caps `VectorRouting` named `model_roles.CLASS_ROUTING`). A
    `Sequential` or subclassed model, or one that merely has a layer named
    like a class-score layer, is refused.
    """
    problem = _application_problem(model)
    if problem is None:
        return
    names = ([layer.name for layer in model.layers]
             if isinstance(model, keras.Model) else [])
    where = f"{argument_name}={path!r}" if path else (
        f"a {type(model).__name__} named {getattr(model, 'name', '?')!r}")
    raise ValueError(
        f"`{argument_name}` is not a model built by keras_caps: {problem}. "
        "Expected a model from an application builder (such as "
        "`EfficientCapsNet`) or `keras-caps train`: a functional model "
        f"with an input named {roles.IMAGE!r} and, as its output, a "
        f"class-score layer named one of {list(roles.CLASS_SCORE_LAYERS)}. "
        f"Received: {where}, a {type(model).__name__} with layers "
        f"{sorted(names)[:8]}")


def _application_problem(model):
    """What keeps `model` from being an application model, or None."""
    if not isinstance(model, keras.Model):
        return "it is not a Keras model"
    if isinstance(model, keras.Sequential):
        return "it is a Sequential model"
    try:
        inputs, outputs = list(model.inputs), keras.tree.flatten(
            model.outputs)
    except (AttributeError, TypeError, ValueError):
        return "it is not a functional model (no input and output graph)"
    names = [layer.name for layer in model.layers]
    scores = [name for name in roles.CLASS_SCORE_LAYERS if name in names]
    if len(scores) != 1:
        return (f"it has {len(scores)} class-score layers "
                f"{scores}, not one")
    score_output = model.get_layer(scores[0]).output
    if not any(output is score_output for output in outputs):
        return f"its {scores[0]!r} layer is not an output of the model"
    if any(_tensor_name(tensor) == roles.IMAGE for tensor in inputs):
        return None
    if roles.CLASS_ROUTING in names:
        if isinstance(model.get_layer(roles.CLASS_ROUTING), VectorRouting):
            return None
    return f"it has no input named {roles.IMAGE!r}"


def _tensor_name(tensor):
    """The name of the layer that made the symbolic `tensor`."""
    history = getattr(tensor, "_keras_history", None)
    return history[0].name if history else getattr(tensor, "name", None)


def _archive_problem(path):
    """Why `path` is not a `.keras` archive, or `None` when it looks like one.
    """
    try:
        if not zipfile.is_zipfile(path):
            return ("not a zip archive (truncated, or another kind of "
                    "file)")
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            broken = archive.testzip()
    except (OSError, zipfile.BadZipFile) as error:
        return f"the archive cannot be read ({error})"
    if "config.json" not in names:
        return "the zip archive holds no config.json"
    if broken is not None:
        return f"the archive's member {broken!r} is corrupt"
    return None
