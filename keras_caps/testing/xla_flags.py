"""XLA's compiler settings for the test suite: compile fast, same results.

The tests' tiny tensors make compiling most of the JAX time, since XLA
compiles every new shape of every op. Two settings cut it:

- XLA's CPU fusion emitters (its newer code generator) compile such small
  programs about twice as slowly as the classic one: turned off on every
  backend (jaxlib 0.10.2: 42 % less time for
  tests/layers/vector_routing_test.py and conv_matrix_caps_test.py; no
  measurable change for TensorFlow's real-data trainings).
- LLVM's optimisation passes: skipped on JAX (about 40 % less again). The
  TensorFlow suite keeps them, since its real-data trainings need the fast
  code.

Both change how fast the compiled code runs, never its results.

Example:

>>> "--xla_cpu_use_fusion_emitters=false" in fast_xla_flags("jax")
True
"""

_CLASSIC_CODE_GENERATOR = "--xla_cpu_use_fusion_emitters=false"
_SKIP_LLVM_PASSES = ("--xla_backend_optimization_level=0 "
                     "--xla_llvm_disable_expensive_passes=true")


def fast_xla_flags(backend):
    """The `XLA_FLAGS` value for tests on `backend` ("jax", "tensorflow"...).

    Args:
        backend: the Keras backend the process runs, or None.

    Returns:
        A string of XLA flags.
    """
    if backend == "jax":
        return f"{_CLASSIC_CODE_GENERATOR} {_SKIP_LLVM_PASSES}"
    return _CLASSIC_CODE_GENERATOR
