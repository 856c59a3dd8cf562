"""The docs' model tables, made from `keras_caps.applications.MODELS`.

An mkdocs hook (`hooks:` in mkdocs.yml): a page line
`<!-- model table: KIND -->` (KIND one of `MODEL_KINDS`: `paper`, `router`
or `control`) becomes the table of the registered models of that kind
when the site is built, so a model or router registered in the code is in
the docs without editing them. tests/docs_model_tables_test.py checks the
pages hold the markers and the tables cover the registry.
"""

import re

MARKER = re.compile(r"^<!-- model table: (\w+) -->$", re.M)
_HEADERS = {
    "paper": ("`--model`", "Builder", "What it is"),
    "router": ("`--model`, `--routers`", "Router layer", "What it is"),
    "control": ("`--model`, `--routers`", "Builder", "What it is"),
}


def model_table(kind, depth=0):
    """The Markdown table of the registered models of `kind`, with links
    to the API pages from a page `depth` folders below docs/."""
    from keras_caps.applications import MODEL_KINDS
    from keras_caps.applications import MODELS
    from keras_caps.applications.capsule_classifier import ROUTERS

    if kind not in MODEL_KINDS:
        raise ValueError(f"Unknown model table {kind!r}. Expected one of "
                         f"{list(MODEL_KINDS)}.")
    up = "../" * depth
    rows = [f"| {' | '.join(_HEADERS[kind])} |", "|---|---|---|"]
    for name, entry in MODELS.items():
        if entry.kind != kind:
            continue
        if kind == "router":
            layer = ROUTERS[name].layer_class.__name__
            link = f"{up}api/layers.md#keras_caps.layers.{layer}"
        else:
            builder = getattr(entry.family.builder, "func",
                              entry.family.builder)
            layer = builder.__name__
            link = f"{up}api/applications.md#keras_caps.applications.{layer}"
        default = "" if entry.compared_by_default or kind == "paper" else (
            " (not in `compare`'s default models: name it)")
        rows.append(f"| `{name}` | [`{layer}`]({link}) | "
                    f"{entry.description}{default} |")
    return "\n".join(rows)


def on_page_markdown(markdown, page, **kwargs):
    """mkdocs' hook: each marker line replaced by its table."""
    depth = page.file.src_uri.count("/")
    return MARKER.sub(lambda match: model_table(match.group(1), depth),
                      markdown)
