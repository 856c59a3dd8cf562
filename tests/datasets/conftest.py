"""Dataset tests never read `$KERAS_CAPS_DATA_DIR` unless they say so."""

import pytest

from keras_caps.datasets import sources


@pytest.fixture(autouse=True)
def no_data_dir_env(monkeypatch):
    monkeypatch.delenv(sources.DATA_DIR_ENV, raising=False)
