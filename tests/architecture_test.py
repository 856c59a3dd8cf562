"""The import rules of docs/layout.md hold, and keras_caps has no import loop.

The rules are read from the table "What each package may import" of
docs/layout.md, so the page and the check cannot drift apart. Every
`import` of a keras_caps module counts, at the top of a module or inside a
function: a deferred import is still a dependency.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_caps"
LAYOUT = ROOT / "docs" / "layout.md"
# Modules of the package's root that any module may import.
SUPPORT = ("api_export", "validation", "model_roles", "version",
           "keras_import")
# Imports anything; nothing in keras_caps may import it.
TESTING = "testing"


def read_rules(text):
    """`({package: packages it may import}, library)` from the layout page.

    A cell names packages in backticks; "the library" stands for the
    packages of the sentence `"The library" is ...:`, and "the library and
    the lab" for every package of the table and `jax_gc_callback`.
    """
    library = set(re.findall(
        r"`(\w+)`", re.search(r'"The library" is (.*?):', text, re.S)[1]))
    table = text.split("## What each package may import", 1)[1]
    cells = dict(re.findall(r"^\| `(\w+)` \|(.*)\|$", table, re.M))
    rules = {}
    for package, cell in cells.items():
        allowed = set(re.findall(r"`(\w+)`", cell))
        if "the library and the lab" in cell:
            allowed |= set(cells) | {"jax_gc_callback"}
        elif "the library" in cell:
            allowed |= library
        rules[package] = allowed
    rules["keras_caps"] = library  # The root package's __init__.
    return rules, library


def module_names(root=PACKAGE):
    """`{dotted module name: path}` of every module of the package."""
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports_of(name, path, modules):
    """The keras_caps modules `name` imports, anywhere in its code.

    `from package import name` counts as importing the submodule
    `package.name` where there is one, else the package.
    """
    found = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = name.split(".")
                parent = parent if is_package else parent[:-1]
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {target for target in found if target in modules} - {name}


def package_of(module):
    """`keras_caps.layers.fc_caps` -> `layers`; the root -> `keras_caps`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "keras_caps"


def import_graph(modules):
    return {name: imports_of(name, path, modules)
            for name, path in modules.items()}


def forbidden_imports(graph, rules):
    """`["a.b imports c.d (package b may not import c)", ...]`."""
    found = []
    for module, targets in sorted(graph.items()):
        package = package_of(module)
        if package == TESTING or package in SUPPORT:
            continue
        for target in sorted(targets):
            target_package = package_of(target)
            if target_package == package or target_package in SUPPORT:
                continue
            if target_package not in rules.get(package, set()):
                found.append(f"{module} imports {target} (`{package}` may "
                             f"not import `{target_package}`)")
    return found


def import_loops(graph):
    """The strongly connected components of more than one module."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(start):
        # Tarjan's algorithm, iterative: (node, iterator over its targets).
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        loops.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return loops


@pytest.fixture(scope="module")
def graph():
    return import_graph(module_names())


def test_the_layout_table_names_every_package():
    rules, library = read_rules(LAYOUT.read_text())
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages - {TESTING} == set(rules) - {"keras_caps"}, (
        "docs/layout.md's table and keras_caps's packages differ: "
        f"{sorted(packages ^ set(rules) - {TESTING, 'keras_caps'})}")
    assert library == {"ops", "layers", "losses", "metrics", "schedules",
                       "diagnostics", "callbacks", "inference",
                       "applications"}


def test_every_import_is_allowed_by_the_layout(graph):
    rules, _ = read_rules(LAYOUT.read_text())
    forbidden = forbidden_imports(graph, rules)
    assert not forbidden, ("Imports that docs/layout.md does not allow:\n"
                           + "\n".join(forbidden))


def test_nothing_imports_testing(graph):
    importers = sorted(module for module, targets in graph.items()
                       if package_of(module) != TESTING and any(
                           package_of(target) == TESTING
                           for target in targets))
    assert not importers, f"keras_caps.testing imported by {importers}"


def test_no_import_loops(graph):
    loops = import_loops(graph)
    assert not loops, "Import loops: " + "; ".join(
        " <-> ".join(loop) for loop in loops)


def test_the_checks_catch_a_forbidden_import_and_a_loop(tmp_path):
    package = tmp_path / "keras_caps"
    for folder in ("layers", "training"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "layers" / "a.py").write_text(
        "def f():\n    from keras_caps.training import b\n")
    (package / "training" / "b.py").write_text(
        "from keras_caps.layers import a\n")
    toy = import_graph(module_names(package))
    rules = {"layers": set(), "training": {"layers"}}
    assert forbidden_imports(toy, rules) == [
        "keras_caps.layers.a imports keras_caps.training.b (`layers` may "
        "not import `training`)"]
    assert import_loops(toy) == [["keras_caps.layers.a",
                                  "keras_caps.training.b"]]


def test_read_rules_expands_the_library_and_everything():
    text = ('"The library" is `ops` and `layers`: ...\n'
            "## What each package may import\n\n"
            "| package | may import |\n|---|---|\n"
            "| `ops` | |\n| `layers` | `ops` |\n"
            "| `runs` | |\n| `training` | the library, `runs` |\n"
            "| `cli` | the library and the lab |\n")
    rules, library = read_rules(text)
    assert library == {"ops", "layers"}
    assert rules["ops"] == set()
    assert rules["training"] == {"ops", "layers", "runs"}
    assert rules["cli"] >= {"ops", "layers", "runs", "training"}
