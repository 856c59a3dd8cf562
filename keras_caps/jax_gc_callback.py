"""JAX's garbage-collector callback, removed where JAX is not the backend.

Importing TensorFlow imports JAX when it is installed (`tf.lite` looks for
`jax.jit`), so every `keras-caps` process on TensorFlow has JAX loaded,
and JAX appends a function to Python's `gc.callbacks` that runs at every
collection. A process that never runs JAX gains nothing from it, and it
is a place where Ctrl-C or interpreter shutdown can interrupt Python: the
interrupt is then printed as "Exception ignored in: <function
_xla_gc_callback>" with a traceback, and swallowed instead of stopping
the command.
"""

import gc
import sys


def remove_unused_jax_gc_callback():
    """Removes JAX's `gc.callbacks` entry unless the backend is JAX.

    Returns the number of callbacks removed (0 when JAX is the backend or
    was never imported).

    Example:

    >>> from keras_caps.jax_gc_callback import remove_unused_jax_gc_callback
    >>> remove_unused_jax_gc_callback() >= 0
    True
    """
    import keras

    if "jax" not in sys.modules or keras.backend.backend() == "jax":
        return 0
    jax_callbacks = [callback for callback in gc.callbacks
                     if getattr(callback, "__module__", "") == "jax._src.lib"]
    for callback in jax_callbacks:
        gc.callbacks.remove(callback)
    return len(jax_callbacks)
