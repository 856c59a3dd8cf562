"""The `type=` converters of the `keras-caps` flags.

Each raises `argparse.ArgumentTypeError`, which argparse reports as a usage
error naming the flag (exit status 2).
"""

import argparse


def positive_int(text):
    """`"3"` -> `3`; refuses zero, negatives and non-integers."""
    value = _convert(text, int, "a positive integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, received {text!r}")
    return value


def non_negative_int(text):
    """`"0"` -> `0`; refuses negatives and non-integers."""
    value = _convert(text, int, "a non-negative integer")
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, received {text!r}")
    return value


def positive_float(text):
    """`"2.5"` -> `2.5`; refuses zero, negatives, infinity and NaN."""
    value = _convert(text, float, "a positive number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected a positive number, received {text!r}")
    return value


def name_list(text):
    """`"a, b,"` -> `["a", "b"]`."""
    return [name.strip() for name in text.split(",") if name.strip()]


def int_list(text):
    """`"0,1"` -> `[0, 1]`."""
    return _number_list(text, int, "integers")


def float_list(text):
    """`"0.1,0.2"` -> `[0.1, 0.2]`."""
    return _number_list(text, float, "numbers")


def _number_list(text, convert, kind):
    try:
        return [convert(value) for value in name_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated {kind}, received {text!r}") from None


def _convert(text, convert, expected):
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {expected}, received {text!r}") from None
