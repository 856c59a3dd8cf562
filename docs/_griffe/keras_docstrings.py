"""A griffe extension for the docs build: keras_caps docstring sections.

keras_caps docstrings follow the Keras flavour of Google style, which
griffe's Google parser reads only in part: `Example:` and `Reference:` are
followed by a blank line and flush-left text (Google style indents a
section), and `Call arguments:` is not a section griffe knows. Left alone,
the `>>>` lines of an example render as nested quotes and the call
arguments as one paragraph. Before griffe parses a docstring, this
extension indents the example and reference blocks under `Examples:` (the
section griffe renders as doctest code) and `Reference:`, and turns each
call argument into a list item. It changes what the site shows, never the
docstrings in the code.
"""

import re

import griffe

_FLUSH_SECTIONS = {"Example:": "Examples:", "Examples:": "Examples:",
                   "Reference:": "Reference:",
                   "References:": "References:"}
_HEADING = re.compile(r"^[A-Z][A-Za-z ]*:$")
_ITEM = re.compile(r"^(\s+)(\*{0,2}\w+):\s?(.*)$")


def _indent(line):
    return len(line) - len(line.lstrip())


def _indent_flush_sections(lines):
    out = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        heading = _FLUSH_SECTIONS.get(line)
        if heading is None:
            out.append(line)
            continue
        while index < len(lines) and not lines[index].strip():
            index += 1
        if index < len(lines) and _indent(lines[index]) > 0:
            out.append(heading)  # already a Google-style indented block
            continue
        out.append(heading)
        while index < len(lines) and not _HEADING.match(lines[index]):
            out.append("    " + lines[index] if lines[index] else "")
            index += 1
        while out and not out[-1]:
            out.pop()
        out.append("")
    return out


def _list_call_arguments(lines):
    out = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        if line.strip() != "Call arguments:":
            continue
        heading_indent = _indent(line)
        item_indent = None
        while index < len(lines):
            line = lines[index]
            if line.strip() and _indent(line) <= heading_indent:
                break
            match = _ITEM.match(line)
            if match and item_indent is None:
                item_indent = len(match.group(1))
            if match and len(match.group(1)) == item_indent:
                line = (f"{match.group(1)}- `{match.group(2)}`: "
                        f"{match.group(3)}")
            out.append(line)
            index += 1
    return out


def rewrite(text):
    """The docstring `text` with Keras-style sections in Google style."""
    lines = _indent_flush_sections(text.split("\n"))
    return "\n".join(_list_call_arguments(lines)).rstrip()


class KerasDocstrings(griffe.Extension):
    """Rewrites Keras-style sections into ones griffe renders well."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
