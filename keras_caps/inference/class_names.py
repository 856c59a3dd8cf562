"""The class names kept with a model, so predictions can print them.

A trained model's class names live in a JSON list of strings:
`class_names.json` beside the `.keras` file, or
`assets.extra/class_names.json` inside a SavedModel export
(`CLASS_NAMES_FILE`, `EXPORT_CLASS_NAMES_FILE`). `find_class_names` looks
for them there; `read_class_names` also reads a text file with one name
per line (for `keras-caps predict --class-names`).
"""

import contextlib
import json
import os

CLASS_NAMES_FILE = "class_names.json"
"""The class-names file beside a `.keras` model file."""

EXPORT_CLASS_NAMES_FILE = os.path.join("assets.extra", CLASS_NAMES_FILE)
"""The class-names file inside a SavedModel export folder."""


def read_class_names(path, argument_name="class_names"):
    """The class names in `path`: a JSON list, or one name per line.

    A file whose content starts with `[` is read as a JSON list of strings;
    any other as text, one name per line (surrounding spaces and empty lines
    dropped).

    Args:
        path: str or path-like. The file.
        argument_name: str. What named the file, for error messages (e.g.
            `"--class-names"`).

    Returns:
        list of str, in class-index order.

    Raises:
        ValueError: no such file, not a list of strings, no names, or a
            name twice; the message names the argument and the file.

    Example:

    >>> read_class_names("runs/cats/class_names.json")  # doctest: +SKIP
    ['cat', 'dog']
    """
    path = os.fspath(path)
    where = f"`{argument_name}` file {path!r}"
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"Cannot read the {where}: {error}") from None
    if text.lstrip().startswith("["):
        try:
            names = json.loads(text)
        except ValueError as error:
            raise ValueError(
                f"The {where} is not valid JSON: {error}") from None
    else:
        names = [line.strip() for line in text.splitlines() if line.strip()]
    return check_class_names(names, where)


def check_class_names(names, where="class_names"):
    """`names` as a list of str: non-empty, unique strings, else ValueError.

    Example:

    >>> check_class_names(("cat", "dog"))
    ['cat', 'dog']
    """
    if (not isinstance(names, (list, tuple))
            or not all(isinstance(name, str) and name for name in names)):
        raise ValueError(
            f"The {where} must hold a list of non-empty class-name strings. "
            f"Received: {str(names)[:200]}")
    if not names:
        raise ValueError(f"The {where} holds no class names.")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"The {where} names a class twice: {repeated}. Class names must "
            "be unique.")
    return list(names)


def write_class_names(path, class_names):
    """Writes `class_names` to `path` as a JSON list (e.g. beside a model).

    Args:
        path: str or path-like. Usually `<run folder>/class_names.json`
            (`CLASS_NAMES_FILE`) or `<export>/assets.extra/class_names.json`
            (`EXPORT_CLASS_NAMES_FILE`); its folder is created if missing.
        class_names: list of str, in class-index order.

    Example:

    >>> write_class_names("runs/cats/class_names.json",  # doctest: +SKIP
    ...                   ["cat", "dog"])
    """
    names = check_class_names(class_names)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    # Atomic, as `keras_caps.runs.atomic_files` writes (which this
    # backend-agnostic package cannot import: it imports TensorFlow).
    temporary = os.path.join(folder,
                             f".tmp-{os.getpid()}-{os.path.basename(path)}")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(names, file, indent=1)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException as error:  # No temporary file is left behind.
        with contextlib.suppress(OSError):
            if os.path.lexists(temporary):
                os.remove(temporary)
        if isinstance(error, OSError) and error.filename != path:
            raise OSError(error.errno, error.strerror or str(error),
                          path) from error
        raise
    return path


def find_class_names(model_path):
    """The class names kept with the model at `model_path`, or None.

    Looks for `class_names.json` beside a `.keras` file, or for
    `assets.extra/class_names.json` inside a SavedModel export folder.

    Raises:
        ValueError: the file exists but is not a list of unique names.

    Example:

    >>> find_class_names("runs/cats/model.keras")  # doctest: +SKIP
    ['cat', 'dog']
    """
    model_path = os.fspath(model_path)
    if os.path.isdir(model_path):
        candidate = os.path.join(model_path, EXPORT_CLASS_NAMES_FILE)
    else:
        candidate = os.path.join(os.path.dirname(model_path),
                                 CLASS_NAMES_FILE)
    if not os.path.isfile(candidate):
        return None
    return read_class_names(candidate, "class names")
