"""The decorator that exports a public symbol and registers it with Keras."""

import keras

_PACKAGE = "keras_caps"


class keras_caps_export:
    """Marks a class or function as public API of keras_caps.

    The symbol is registered for Keras serialization under the package
    name, so `keras.saving.get_registered_name(FCCaps)` is
    `"keras_caps>FCCaps"` and saved models reload without
    `custom_objects`. The public path is kept on the symbol as
    `_keras_caps_api_path` for documentation and API tests.

    Args:
        path: str. The public import path, e.g. `"keras_caps.layers.FCCaps"`.

    Example:

    >>> @keras_caps_export("keras_caps.layers.MyLayer")
    ... class MyLayer(keras.layers.Layer):
    ...     pass
    >>> keras.saving.get_registered_name(MyLayer)
    'keras_caps>MyLayer'
    """

    def __init__(self, path):
        if not isinstance(path, str) or not path.startswith(_PACKAGE + "."):
            raise ValueError(
                "Received an invalid value for `path`, expected a public "
                f"path starting with '{_PACKAGE}.'. Received: path={path!r}")
        self.path = path

    def __call__(self, symbol):
        symbol._keras_caps_api_path = self.path
        return keras.saving.register_keras_serializable(package=_PACKAGE)(
            symbol)
