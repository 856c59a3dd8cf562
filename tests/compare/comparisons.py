"""`compare` called the way these tests share their arguments.

Each test keeps one dict of keyword arguments for a comparison and
varies it (`{**kwargs, "seeds": [0, 1, 2]}`); `run_comparison` sorts those
into the `ComparisonSettings` fields and the run options of
`keras_caps.compare.compare` (`output_dir`, `data_dir`, `isolation`, ...).
"""

import dataclasses

from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison

SETTING_FIELDS = {field.name for field in
                  dataclasses.fields(ComparisonSettings)}


def run_comparison(routers=None, dataset="mnist", **arguments):
    """`comparison.compare(ComparisonSettings(routers, dataset, ...),
    ...)` with `arguments` split between the two."""
    settings = {name: value for name, value in arguments.items()
                if name in SETTING_FIELDS}
    options = {name: value for name, value in arguments.items()
               if name not in SETTING_FIELDS}
    return comparison.compare(
        ComparisonSettings(routers, dataset, **settings), **options)
