"""Argument checks shared by the layers, losses and builders.

Each check raises a Keras-style error that names the argument, says what
was expected and ends with the received value. The weight regularizer and
constraint helpers at the end also resolve and serialize those arguments.
"""

import math
import numbers

import keras


def check_positive_int(name, value):
    """Raises unless `value` is a positive Python (or NumPy) integer."""
    return _check_integer(name, value, 1, "a positive integer")


def check_non_negative_int(name, value):
    """Raises unless `value` is a Python (or NumPy) integer >= 0."""
    return _check_integer(name, value, 0, "a non-negative integer")


def _check_integer(name, value, minimum, expected):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"Received an invalid type for `{name}`, expected {expected}. "
            f"Received: {name}={value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected {expected}. "
            f"Received: {name}={value!r}")
    return int(value)


def check_bool(name, value):
    """Raises unless `value` is a Python bool."""
    if not isinstance(value, bool):
        raise TypeError(
            f"Received an invalid type for `{name}`, expected a bool. "
            f"Received: {name}={value!r} of type {type(value).__name__}")
    return value


def check_int_pair(name, value):
    """Normalises an int or a pair of ints (e.g. `kernel_size`) to a tuple."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(
                f"Received an invalid value for `{name}`, expected an integer "
                f"or a tuple of 2 integers. Received: {name}={value!r}")
        return tuple(check_positive_int(name, item) for item in value)
    value = check_positive_int(name, value)
    return (value, value)


def check_number(name, value, minimum=None, maximum=None):
    """Raises unless `value` is a real number within the given bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"Received an invalid type for `{name}`, expected a number. "
            f"Received: {name}={value!r} of type {type(value).__name__}")
    if (minimum is not None and value < minimum) or (
            maximum is not None and value > maximum):
        low = "-inf" if minimum is None else minimum
        high = "inf" if maximum is None else maximum
        raise ValueError(
            f"Received an invalid value for `{name}`, expected a number in "
            f"[{low}, {high}]. Received: {name}={value!r}")
    return float(value)


def check_temperature(name, value):
    """Raises unless `value` is a finite number above 0 (a temperature)."""
    value = check_number(name, value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected a finite "
            f"number above 0. Received: {name}={value!r}")
    return value


def check_choice(name, value, choices):
    """Raises unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected one of "
            f"{list(choices)}. Received: {name}={value!r}")
    return value


def check_known_name(name, value, names):
    """Raises unless `value` is one of the registered `names` (e.g. a key of
    `keras_caps.datasets.DATASETS`): `Unknown `name`. Expected one of ...`."""
    try:
        known = value in names
    except TypeError:  # Unhashable, so no key of a dict.
        known = False
    if not known:
        raise ValueError(
            f"Unknown `{name}`. Expected one of {sorted(names)}. "
            f"Received: {name}={value!r}")
    return value


def get_regularizer(name, value):
    """Resolves a weight regularizer with `keras.regularizers.get`.

    Raises a `ValueError` naming the argument when Keras cannot interpret
    `value`.
    """
    return _resolve(name, value, keras.regularizers.get, "regularizer",
                    "'l2', keras.regularizers.L2(1e-4)")


def get_constraint(name, value):
    """Resolves a weight constraint with `keras.constraints.get`.

    Raises a `ValueError` naming the argument when Keras cannot interpret
    `value`.
    """
    return _resolve(name, value, keras.constraints.get, "constraint",
                    "'non_neg', keras.constraints.MaxNorm(3.0)")


def set_regularizers_and_constraints(layer, **weights):
    """Resolves and stores a layer's weight regularizers and constraints.

    Each keyword names a weight and gives its `(regularizer, constraint)`
    arguments, e.g. `kernel=(kernel_regularizer, kernel_constraint)`; they
    are checked, resolved and stored as `layer.kernel_regularizer` and
    `layer.kernel_constraint`, each `None` or a Keras object.
    """
    for weight, (regularizer, constraint) in weights.items():
        setattr(layer, f"{weight}_regularizer",
                get_regularizer(f"{weight}_regularizer", regularizer))
        setattr(layer, f"{weight}_constraint",
                get_constraint(f"{weight}_constraint", constraint))


def serialize_regularizers_and_constraints(layer, weights):
    """The `get_config` entries of a layer's regularizers and constraints.

    `weights` names the weights (e.g. `("kernel", "bias")`); the layer
    stores them as `<weight>_regularizer` and `<weight>_constraint`.
    """
    config = {}
    for weight in weights:
        config[f"{weight}_regularizer"] = keras.regularizers.serialize(
            getattr(layer, f"{weight}_regularizer"))
        config[f"{weight}_constraint"] = keras.constraints.serialize(
            getattr(layer, f"{weight}_constraint"))
    return config


def _resolve(name, value, get, kind, examples):
    try:
        return get(value)
    except (ValueError, TypeError):
        raise ValueError(
            f"Received an invalid value for `{name}`, expected None, a "
            f"{kind} name, instance, config dict or callable (e.g. "
            f"{examples}). Received: {name}={value!r}") from None


def cast_integer_input(inputs, dtype):
    """Integer or boolean `inputs` (e.g. uint8 images) cast to `dtype`.

    Keras casts floating inputs to a layer's compute dtype by itself, never
    integer ones; the capsule layers call this first so `uint8` pixels or
    integer labels work as their float values do. Floating inputs are
    returned unchanged.
    """
    inputs = keras.ops.convert_to_tensor(inputs)
    if keras.backend.is_float_dtype(keras.backend.standardize_dtype(
            inputs.dtype)):
        return inputs
    return keras.ops.cast(inputs, dtype)
