"""The docs' model tables are the registry's: docs/_hooks/model_tables.py
makes them from `keras_caps.applications.MODELS` when the site is built."""

import importlib.util
import pathlib
import re

import pytest

from keras_caps.applications import MODEL_KINDS
from keras_caps.applications import MODELS

ROOT = pathlib.Path(__file__).resolve().parents[1]
HOOK = ROOT / "docs" / "_hooks" / "model_tables.py"
# The pages that show model tables, and of which kinds.
_PAGES = {"training.md": ["paper", "router", "control"],
          "routers.md": ["router"]}


def _load_hook():
    spec = importlib.util.spec_from_file_location("model_tables", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


model_tables = _load_hook()


class _Page:
    """What the hook reads of an mkdocs page: its path under docs/."""

    def __init__(self, src_uri):
        self.file = type("File", (), {"src_uri": src_uri})()


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_each_table_lists_the_registered_models_of_its_kind(kind):
    table = model_tables.model_table(kind).splitlines()
    names = re.findall(r"^\| `(\w+)` \|", "\n".join(table), re.M)
    assert names == [name for name, entry in MODELS.items()
                     if entry.kind == kind]
    assert len(table) == len(names) + 2  # The header and its rule.
    for name in names:
        row = next(line for line in table if line.startswith(f"| `{name}`"))
        assert MODELS[name].description in row


def test_links_point_up_from_pages_in_folders():
    top = model_tables.model_table("router", depth=0)
    nested = model_tables.model_table("router", depth=1)
    assert "(api/layers.md#keras_caps.layers.DynamicRouting)" in top
    assert "(../api/layers.md#keras_caps.layers.DynamicRouting)" in nested
    assert ("(api/applications.md#keras_caps.applications.CNNBaseline)"
            in model_tables.model_table("control"))
    with pytest.raises(ValueError, match="Unknown model table 'toys'"):
        model_tables.model_table("toys")


@pytest.mark.parametrize("page", sorted(_PAGES))
def test_the_pages_hold_the_markers_and_the_hook_fills_them(page):
    markdown = (ROOT / "docs" / page).read_text()
    markers = model_tables.MARKER.findall(markdown)
    assert markers == _PAGES[page]
    built = model_tables.on_page_markdown(markdown, page=_Page(page))
    assert "<!-- model table" not in built
    for kind in markers:
        assert model_tables.model_table(kind) in built
