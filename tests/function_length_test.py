"""No function of keras_caps is longer than `MAX_LINES` lines of code.

A function's length is counted from its `def` line to its last line,
without its docstring (the public builders' docstrings, with their
arguments and examples, are long by design): beyond that, a function
should be split into named helpers.
"""

import ast
import pathlib

MAX_LINES = 60


def _docstring_lines(node):
    first = node.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return first.end_lineno - first.lineno + 1
    return 0


def long_functions(root, max_lines=MAX_LINES):
    """`["path:line name (n lines)", ...]` of the functions under `root`
    longer than `max_lines` lines without their docstrings."""
    found = []
    for path in sorted(pathlib.Path(root).rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = (node.end_lineno - node.lineno + 1
                      - _docstring_lines(node))
            if length > max_lines:
                found.append(f"{relative}:{node.lineno} {node.name} "
                             f"({length} lines)")
    return found


def test_no_function_is_longer_than_max_lines():
    root = pathlib.Path(__file__).parents[1] / "keras_caps"
    too_long = long_functions(root)
    assert not too_long, (
        f"Functions longer than {MAX_LINES} lines of code (split them into "
        "named helpers): " + "; ".join(too_long))


def test_the_count_leaves_out_the_docstring(tmp_path):
    body = "\n".join(f"    x{index} = {index}" for index in range(59))
    docstring = '    """A long\n\n    docstring.\n    """\n'
    # 60 lines without the docstring: short enough.
    (tmp_path / "short.py").write_text(f"def short():\n{docstring}{body}\n")
    (tmp_path / "long.py").write_text(
        f"def long():\n{body}\n    x = 1\n    return x\n")
    assert long_functions(tmp_path) == ["long.py:1 long (62 lines)"]
