"""Keras, imported with a clear error when its backend is not installed.

keras_caps installs no backend of its own (`pip install
'keras-caps[tensorflow]'`, `'keras-caps[jax]'`, or PyTorch), so a machine
may have Keras without the backend Keras is set to: TensorFlow unless
`KERAS_BACKEND` or `~/.keras/keras.json` says otherwise. Keras then fails
deep inside its own import with `No module named 'tensorflow'`; this
module turns that into one message saying which backend Keras asked for
and how to install it or pick an installed one.
"""

import importlib
import importlib.util
import os

# Each Keras backend (named as the module it imports) and how to install
# it.
_INSTALL = {"tensorflow": "pip install 'keras-caps[tensorflow]'",
            "jax": "pip install 'keras-caps[jax]'",
            "torch": "pip install torch (https://pytorch.org for the build "
                     "that fits your machine)"}


def import_keras():
    """Imports Keras; raises an `ImportError` naming the missing backend.

    Returns:
        The `keras` module.

    Raises:
        ImportError: Keras' backend (`KERAS_BACKEND`, `~/.keras/keras.json`,
            TensorFlow by default) is not installed. The message names it,
            the command that installs it, and the backends that are
            installed.

    Example:

    >>> from keras_caps.keras_import import import_keras
    >>> import_keras().__name__
    'keras'
    """
    try:
        return importlib.import_module("keras")
    except ModuleNotFoundError as error:
        backend = (error.name or "").split(".")[0]
        if backend not in _INSTALL:
            raise
        raise ImportError(_missing_backend_message(backend)) from error


def _missing_backend_message(backend):
    installed = [name for name in _INSTALL
                 if name != backend and _installed(name)]
    chosen_by = ("KERAS_BACKEND" if os.environ.get("KERAS_BACKEND")
                 else "~/.keras/keras.json, or Keras' default")
    choice = (f"or run with an installed one: KERAS_BACKEND="
              f"{'|'.join(installed)}" if installed
              else "no other Keras backend (tensorflow, jax, torch) is "
              "installed either")
    return (f"keras_caps needs a Keras backend: Keras is set to "
            f"{backend!r} (by {chosen_by}) but {backend} is not installed. "
            f"Install it ({_INSTALL[backend]}), {choice}.")


def _installed(module):
    return importlib.util.find_spec(module) is not None
