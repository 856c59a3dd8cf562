import socket
import time

import numpy as np
import pytest
import requests
import tensorflow_datasets as tfds

from keras_caps.datasets import sources
from tests.datasets import fixtures

# What every "cannot get the data" message tells the user to do offline.
OFFLINE_HINTS = ("data_dir", "--data-dir", "KERAS_CAPS_DATA_DIR",
                 "train-images-idx3-ubyte.gz", "tfds build")
# The hosts TFDS 4.9 downloads these datasets from (its checksum files).
DOWNLOAD_HOSTS = {"mnist": "https://storage.googleapis.com/",
                  "smallnorb": "https://cs.nyu.edu/"}


def _refuse_probes(monkeypatch):
    def head(url, **kwargs):
        raise AssertionError(f"Probed {url} although nothing downloads")

    monkeypatch.setattr(requests, "head", head)


@pytest.mark.parametrize("name", ["mnist", "smallnorb"])
def test_missing_tfds_data_without_download_fails_fast(tmp_path, name,
                                                       monkeypatch):
    _refuse_probes(monkeypatch)
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        sources.load_tfds(name, "train", data_dir=str(tmp_path),
                          download=False)
    assert time.monotonic() - start < 10.0  # no download, no network wait
    message = str(error.value)
    for hint in (*OFFLINE_HINTS, name, "--no-download"):
        assert hint in message


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _go_offline(monkeypatch, how, silent_server):
    """Makes every HTTP(S) request of this process fail like offline.

    `"this_machine"` changes nothing and needs a machine without network
    access (skipped elsewhere); `"refused"` routes requests through a
    proxy port nobody listens on (connection refused, as without a route);
    `"silent"` through a proxy that accepts connections and never answers
    (a black-holed network), with a short probe timeout.
    """
    if how == "this_machine":
        try:
            socket.getaddrinfo("storage.googleapis.com", 443)
        except OSError:
            return
        pytest.skip("This machine has network access.")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    if how == "refused":
        proxy = f"http://127.0.0.1:{_closed_port()}"
    else:
        proxy = f"http://127.0.0.1:{silent_server.getsockname()[1]}"
        monkeypatch.setattr(sources, "_PROBE_TIMEOUT", 1.0)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy)


@pytest.fixture
def silent_server():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server


@pytest.mark.parametrize("name,how", [
    ("mnist", "this_machine"), ("mnist", "refused"), ("mnist", "silent"),
    ("smallnorb", "refused")])
def test_download_without_network_fails_within_seconds(
        tmp_path, monkeypatch, silent_server, name, how):
    _go_offline(monkeypatch, how, silent_server)
    start = time.monotonic()
    with pytest.raises(ValueError) as error:
        sources.load_tfds(name, "train", data_dir=str(tmp_path))
    # TFDS alone retries for minutes here.
    assert time.monotonic() - start < 10.0
    message = str(error.value)
    for hint in (*OFFLINE_HINTS, name, DOWNLOAD_HOSTS[name],
                 "cannot download"):
        assert hint in message
    assert not (tmp_path / name).exists() or not any(
        (tmp_path / name).rglob("*.tfrecord*"))


class _FakeTfdsLoad:
    """`tfds.load` over an empty data directory that TFDS could fill."""

    def __init__(self, prepared=False):
        self.prepared = prepared
        self.calls = []

    def __call__(self, name, **kwargs):
        self.calls.append(kwargs)
        if not (self.prepared or kwargs["download"]):
            raise AssertionError(f"Dataset {name}: could not find data")
        return f"examples of {name}"


@pytest.mark.parametrize("name", ["mnist", "smallnorb"])
def test_download_on_passes_download_true_to_tfds(monkeypatch, name):
    fake_load = _FakeTfdsLoad()
    monkeypatch.setattr(tfds, "load", fake_load)
    probed = []
    monkeypatch.setattr(
        requests, "head", lambda url, **kwargs: probed.append(url))
    assert sources.load_tfds(name, "test", data_dir="/tfds",
                             as_supervised=True) == f"examples of {name}"
    assert probed == [DOWNLOAD_HOSTS[name]]
    expected = {"split": "test", "data_dir": "/tfds", "try_gcs": False,
                "shuffle_files": False, "as_supervised": True}
    assert fake_load.calls == [{**expected, "download": False},
                               {**expected, "download": True}]


@pytest.mark.parametrize("download", [True, False])
def test_prepared_data_is_read_without_probing(monkeypatch, download):
    fake_load = _FakeTfdsLoad(prepared=True)
    monkeypatch.setattr(tfds, "load", fake_load)
    _refuse_probes(monkeypatch)
    assert sources.load_tfds("mnist", "train",
                             download=download) == "examples of mnist"
    assert [call["download"] for call in fake_load.calls] == [False]


def test_download_off_never_calls_tfds_with_download(monkeypatch):
    fake_load = _FakeTfdsLoad()
    monkeypatch.setattr(tfds, "load", fake_load)
    _refuse_probes(monkeypatch)
    with pytest.raises(ValueError, match="--no-download"):
        sources.load_image_arrays("fashion_mnist", download=False)
    assert [call["download"] for call in fake_load.calls] == [False]


def test_unknown_dataset_is_not_probed(monkeypatch):
    _refuse_probes(monkeypatch)
    with pytest.raises(ValueError, match="not_a_dataset"):
        sources.load_tfds("not_a_dataset", "train")


def test_resolve_data_dir(monkeypatch, tmp_path):
    assert sources.resolve_data_dir(None) is None
    assert sources.resolve_data_dir(tmp_path) == str(tmp_path)
    monkeypatch.setenv(sources.DATA_DIR_ENV, "/somewhere")
    assert sources.resolve_data_dir(None) == "/somewhere"
    assert sources.resolve_data_dir(tmp_path) == str(tmp_path)


def test_image_arrays_from_idx_files(tmp_path):
    expected = fixtures.write_idx_dataset(tmp_path / "fashion_mnist",
                                          num_train=20, num_test=10)
    arrays = sources.load_image_arrays("fashion_mnist", tmp_path)
    np.testing.assert_array_equal(arrays["test"][0], expected["test"][0])


def test_image_arrays_from_tfds():
    with tfds.testing.mock_data(num_examples=12):
        arrays = sources.load_image_arrays("mnist")
    for split in ("train", "test"):
        images, labels = arrays[split]
        assert images.shape == (12, 28, 28) and images.dtype == np.uint8
        assert labels.shape == (12,) and labels.dtype == np.int64


def test_missing_files_mention_the_subfolder(tmp_path):
    fixtures.write_idx_dataset(tmp_path / "mnist", num_train=10, num_test=10)
    with pytest.raises(ValueError, match="fashion_mnist' subfolder"):
        sources.load_image_arrays("fashion_mnist", tmp_path)
