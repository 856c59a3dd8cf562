"""Loading a saved `.keras` model with errors that say what is wrong."""

import os
import zipfile

import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export

# The name of `model_roles.CLASS_SCORE_LAYERS` before `model_roles`.
SCORE_LAYER_NAMES = roles.CLASS_SCORE_LAYERS


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
      a keras_caps application builder (it has no `length` or `logits`
      class-score layer).

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
    """Raises unless `model` comes from a keras_caps application builder."""
    names = ({layer.name for layer in model.layers}
             if isinstance(model, keras.Model) else set())
    if not names & set(roles.CLASS_SCORE_LAYERS):
        where = f"{argument_name}={path!r}" if path else (
            f"a {type(model).__name__} named {getattr(model, 'name', '?')!r}")
        raise ValueError(
            f"`{argument_name}` is not a model built by keras_caps: "
            "expected a model from an application builder (such as "
            "`EfficientCapsNet`) or `keras-caps train`, with a class-score "
            f"layer named one of {list(roles.CLASS_SCORE_LAYERS)}. Received: "
            f"{where}, with layers {sorted(names)[:8]}")


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
