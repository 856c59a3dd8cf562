"""keras_caps installs no Keras backend: one missing is one clear error,
and the package's requirements name none (they are extras)."""

import configparser
import importlib
import os
import pathlib
import subprocess
import sys

import pytest

from keras_caps import keras_import
from keras_caps.testing.without_tensorflow import REFUSE_TENSORFLOW

_SETUP_CFG = pathlib.Path(__file__).resolve().parents[1] / "setup.cfg"


def _requirement_names(lines):
    names = []
    for line in lines.splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.append(line.split(">")[0].split("=")[0].split("[")[0]
                         .split("<")[0].strip())
    return names


def test_requirements_leave_the_backend_to_extras():
    config = configparser.ConfigParser()
    config.read(_SETUP_CFG)
    required = _requirement_names(config["options"]["install_requires"])
    extras = config["options.extras_require"]
    assert not {"tensorflow", "jax", "torch"} & set(required), required
    assert "tensorflow" in _requirement_names(extras["tensorflow"])
    assert "jax" in _requirement_names(extras["jax"])
    # The README's install (".[test]") runs the whole suite on TensorFlow.
    tested = set(_requirement_names(extras["test"]))
    assert set(_requirement_names(extras["tensorflow"])) <= tested


@pytest.mark.parametrize("missing, backend",
                         [("tensorflow.python", "tensorflow"), ("jax", "jax"),
                          ("torch._C", "torch")])
def test_missing_backend_is_named_with_its_install(monkeypatch, missing,
                                                   backend):
    def import_module(name):
        raise ModuleNotFoundError(f"No module named {missing!r}",
                                  name=missing)

    monkeypatch.setattr(importlib, "import_module", import_module)
    monkeypatch.setenv("KERAS_BACKEND", backend)
    with pytest.raises(ImportError, match=(
            f"Keras is set to '{backend}' \\(by KERAS_BACKEND\\) but "
            f"{backend} is not installed")) as raised:
        keras_import.import_keras()
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def test_other_missing_modules_are_not_relabelled(monkeypatch):
    def import_module(name):
        raise ModuleNotFoundError("No module named 'h5py'", name="h5py")

    monkeypatch.setattr(importlib, "import_module", import_module)
    with pytest.raises(ModuleNotFoundError, match="h5py"):
        keras_import.import_keras()


@pytest.mark.single_backend
def test_import_without_tensorflow_says_how_to_get_a_backend():
    """In a process where TensorFlow cannot be imported and Keras is set to
    it, `import keras_caps` fails with the message, naming the installed
    backends to switch to."""
    pytest.importorskip("jax")
    environment = {**os.environ, "KERAS_BACKEND": "tensorflow",
                   "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", REFUSE_TENSORFLOW + "import keras_caps"],
        env=environment, capture_output=True, text=True, timeout=300,
        check=False)
    assert result.returncode == 1, result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: keras_caps needs a Keras "
                                "backend: Keras is set to 'tensorflow'"), \
        last_line
    assert "pip install 'keras-caps[tensorflow]'" in last_line
    assert "KERAS_BACKEND=jax" in last_line
