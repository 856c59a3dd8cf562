"""The docstring examples of the public API run and print what they say."""

import doctest
import importlib
import pkgutil

import keras
import numpy as np
import pytest

import keras_caps

CORE_PACKAGES = ("ops", "layers", "losses", "metrics", "callbacks",
                 "applications", "inference")


def _modules():
    for package_name in CORE_PACKAGES:
        package = importlib.import_module(f"keras_caps.{package_name}")
        for info in pkgutil.walk_packages(package.__path__,
                                          f"{package.__name__}."):
            yield info.name
    yield "keras_caps.api_export"
    yield "keras_caps.model_roles"


@pytest.mark.parametrize("module_name", sorted(_modules()))
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                   | doctest.NORMALIZE_WHITESPACE)
    globs = {"keras": keras, "np": np, "keras_caps": keras_caps,
             **vars(module)}
    for test in finder.find(module, module_name, globs=globs):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} doctest(s) failed"
