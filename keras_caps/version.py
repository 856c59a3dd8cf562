"""The version of keras_caps."""

__version__ = "0.2.0"
