"""JAX's gc callback is dropped by `keras-caps` unless JAX is the backend.

TensorFlow imports JAX when it is installed, and a Ctrl-C or interpreter
shutdown that lands in JAX's callback prints a traceback (and the
interrupt is lost), so the commands on TensorFlow remove it.
"""

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import gc, json, sys
import keras_caps.cli

def jax_callbacks():
    return sum(getattr(c, "__module__", "") == "jax._src.lib"
               for c in gc.callbacks)

before = jax_callbacks()
status = keras_caps.cli.main(["evaluate", "--model-path", sys.argv[1]])
print(json.dumps({"jax_loaded": "jax" in sys.modules, "before": before,
                  "after": jax_callbacks(), "status": status}))
"""


def _probe(backend, tmp_path):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "missing.keras")],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.single_backend
def test_keras_caps_on_tensorflow_drops_jax_gc_callback(tmp_path):
    pytest.importorskip("jax")
    probe = _probe("tensorflow", tmp_path)
    # TensorFlow loaded JAX, whose callback was there before main() ran.
    assert probe["jax_loaded"] and probe["before"] == 1, probe
    assert probe["after"] == 0, probe
    assert probe["status"] == 2, probe  # The missing model: bad input.


@pytest.mark.single_backend
def test_keras_caps_on_jax_keeps_jax_gc_callback(tmp_path):
    pytest.importorskip("jax")
    probe = _probe("jax", tmp_path)
    assert probe["before"] == 1 and probe["after"] == 1, probe
