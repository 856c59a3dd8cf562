"""The docstrings of the public API: they exist, the API reference lists
them all, and their examples run and print what they say."""

import doctest
import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import re
import types

import keras
import numpy as np
import pytest

import keras_caps

CORE_PACKAGES = ("ops", "layers", "losses", "metrics", "callbacks",
                 "schedules", "diagnostics", "applications", "inference")


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


API_PAGES = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api"
# The packages the API reference documents: docs/api/<package>.md each.
DOCUMENTED_PACKAGES = ("layers", "ops", "losses", "metrics", "callbacks",
                       "schedules", "diagnostics", "applications", "inference",
                       "model_roles", "export", "evaluation", "datasets",
                       "training", "runs", "compare", "visualization")


def _api_entries():
    """`(page, dotted path)` of each `::: path` line of the API pages."""
    for page in sorted(API_PAGES.glob("*.md")):
        for line in page.read_text().splitlines():
            match = re.match(r":::\s+(\S+)", line)
            if match:
                yield page.name, match.group(1)


def _resolve(path):
    """The object `path` names, read as attribute access where it can be.

    `keras_caps.inference.inference_model` is both a submodule and the
    function the package exports under that name; attribute access gives
    the function, `pkgutil.resolve_name` the module. A path through a
    module the package does not expose as an attribute (e.g.
    `keras_caps.inference.inference_model.inference_model`) falls back to
    `pkgutil.resolve_name`.
    """
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    try:
        for index, part in enumerate(parts[1:], start=1):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            else:
                obj = importlib.import_module(".".join(parts[:index + 1]))
    except ImportError:
        return pkgutil.resolve_name(path)
    return obj


def _is_module_path(path):
    try:
        return importlib.util.find_spec(path) is not None
    except ImportError:  # a parent is not a package
        return False


def _is_documentable(obj):
    return ((inspect.isclass(obj) or inspect.isfunction(obj))
            and obj.__module__.startswith("keras_caps."))


def _shown_objects(obj):
    """What an entry renders: the object, and a module's own members."""
    if not isinstance(obj, types.ModuleType):
        return [obj]
    return [obj] + [member for name, member in vars(obj).items()
                    if not name.startswith("_") and _is_documentable(member)
                    and member.__module__ == obj.__name__]


def _docstring(obj):
    # A class without a docstring has `__doc__` None in its own dict;
    # `inspect.getdoc` would return a base class's docstring instead.
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
    return (doc or "").strip()


@pytest.mark.single_backend
def test_api_pages_document_objects_with_docstrings():
    entries = list(_api_entries())
    assert entries, f"no `::: ` entries in {API_PAGES}"
    missing, ambiguous = [], []
    for page, path in entries:
        entry = _resolve(path)
        if (not isinstance(entry, types.ModuleType)
                and _is_module_path(path)):
            # mkdocstrings reads the source and would document the module.
            ambiguous.append(f"{path} (docs/api/{page}): write "
                             f"{entry.__module__}.{entry.__qualname__}")
        for obj in _shown_objects(entry):
            if not _docstring(obj):
                name = getattr(obj, "__qualname__", obj.__name__)
                missing.append(f"{obj.__module__}.{name} (docs/api/{page})")
    assert not ambiguous, (
        "These API entries name a function and a submodule of the same "
        "name: " + ", ".join(ambiguous))
    assert not missing, (
        "These objects of the API reference have no docstring (mkdocstrings "
        "would render an empty entry): " + ", ".join(sorted(set(missing))))


@pytest.mark.single_backend
def test_api_pages_list_every_public_class_and_function():
    shown = {id(obj) for _, path in _api_entries()
             for obj in _shown_objects(_resolve(path))}
    unlisted = []
    for package_name in DOCUMENTED_PACKAGES:
        page = API_PAGES / f"{package_name}.md"
        assert page.exists(), f"keras_caps.{package_name} has no {page}"
        package = importlib.import_module(f"keras_caps.{package_name}")
        for name in dir(package):
            if name.startswith("_"):
                continue
            obj = getattr(package, name)
            if _is_documentable(obj) and id(obj) not in shown:
                unlisted.append(f"keras_caps.{package_name}.{name}")
    assert not unlisted, (
        "These public classes and functions are in no API page; add a "
        "`::: <path>` line for each to docs/api/<package>.md: "
        + ", ".join(unlisted))

