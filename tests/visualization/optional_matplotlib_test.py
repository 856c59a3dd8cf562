"""matplotlib is optional: never imported with the package, and a clear
error saying how to install it when a figure is asked for without it."""

import doctest
import importlib
import pathlib
import pkgutil
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_caps
from keras_caps import visualization


def test_package_works_without_matplotlib():
    # Keras itself imports matplotlib when it is installed, so the check
    # hides it: the package, its CLI parser and the error must still work.
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "import keras_caps, keras_caps.visualization, keras_caps.cli\n"
        "keras_caps.cli.build_parser()\n"
        "try:\n"
        "    keras_caps.visualization.plot_training_curves({'loss': [1.0]})\n"
        "except ImportError as error:\n"
        "    print(error)\n")
    result = subprocess.run([sys.executable, "-c", code], check=True,
                            capture_output=True, text=True,
                            env={"KERAS_BACKEND": "jax",
                                 "PATH": "/usr/bin:/bin"})
    assert 'pip install "keras-caps[plot]"' in result.stdout


def test_no_module_imports_matplotlib_at_import_time():
    root = pathlib.Path(keras_caps.__file__).parent
    for path in root.rglob("*.py"):
        assert not re.search(r"(?m)^(import|from) matplotlib",
                             path.read_text()), path


@pytest.mark.parametrize("draw", [
    lambda: visualization.plot_training_curves({"loss": [1.0]}),
    lambda: visualization.plot_reconstructions(None, None),
    lambda: visualization.plot_capsule_perturbations(None, None),
    lambda: visualization.plot_routing_maps(None, None),
    lambda: visualization.plot_credit_overlays(None, None),
    lambda: visualization.plot_to_file("curves", "x.png", log_path="x"),
])
def test_missing_matplotlib_says_how_to_install_it(draw, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r'pip install "keras-caps\[plot\]"'):
        draw()


def _modules():
    for info in pkgutil.iter_modules(visualization.__path__):
        if not info.name.startswith("_"):
            yield f"keras_caps.visualization.{info.name}"


@pytest.mark.parametrize("module_name", sorted(_modules()))
def test_docstring_examples(module_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                   | doctest.NORMALIZE_WHITESPACE)
    globs = {"keras": keras, "np": np, "keras_caps": keras_caps,
             **vars(module)}
    for test in doctest.DocTestFinder().find(module, module_name,
                                             globs=globs):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
