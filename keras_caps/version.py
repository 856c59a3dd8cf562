"""The version of keras_caps."""

__version__ = "0.1.0"
