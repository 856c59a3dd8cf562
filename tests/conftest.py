"""Markers and options shared by the test suite.

- `large`: slow tests on real data; skipped unless `--run_large` is given.
- `gpu`: checks that need an accelerator; skipped when none is visible.

`XLA_FLAGS` (unless set): compile fast, same results; see
`keras_caps.testing.xla_flags`.
"""

import os

import pytest

from keras_caps.testing.xla_flags import fast_xla_flags

# Before any backend starts; a user's own flags are kept.
os.environ.setdefault("XLA_FLAGS",
                      fast_xla_flags(os.environ.get("KERAS_BACKEND")))


def pytest_addoption(parser):
    parser.addoption("--run_large", action="store_true", default=False,
                     help="Run the slow tests marked `large`.")


def pytest_collection_modifyitems(config, items):
    run_large = config.getoption("--run_large")
    has_gpu = bool(os.environ.get("KERAS_CAPS_HAS_GPU"))
    skip_large = pytest.mark.skip(reason="needs --run_large")
    skip_gpu = pytest.mark.skip(reason="needs an accelerator")
    for item in items:
        if "large" in item.keywords and not run_large:
            item.add_marker(skip_large)
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)
