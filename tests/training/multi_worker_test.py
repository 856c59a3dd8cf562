"""Real multi-worker training: two worker processes on 127.0.0.1.

Each worker runs `keras_caps.cli train --strategy multi_worker` with its own
`TF_CONFIG` and its own output folder (as on machines that share no file
system). A wrapper around `keras.Model.fit`, installed by the driver script
only, saves each worker's weights right after `fit` so the test can compare
them; nothing else about the command changes.

The trainable weights must be bitwise identical on both workers (one
all-reduced gradient, one optimizer step, everywhere). Keras 3 keeps the
batch-norm moving statistics as per-replica state (aggregation "none"): each
worker averages the batch statistics of its own share of each global batch,
so those differ between workers and the chief's are the ones saved.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

TIMEOUT_SECONDS = 240

_DRIVER = textwrap.dedent("""
    import sys

    import keras
    import numpy as np

    from keras_caps import cli

    weights_path = sys.argv[1]
    fit = keras.Model.fit

    def fit_and_save_weights(self, *args, **kwargs):
        history = fit(self, *args, **kwargs)
        np.savez(weights_path, **{
            f"{i:03d}:{w.path}:{'trainable' if w.trainable else 'state'}":
            w.numpy() for i, w in enumerate(self.weights)})
        return history

    keras.Model.fit = fit_and_save_weights
    sys.exit(cli.main(sys.argv[2:]))
""")


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _stop(processes):
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    for process in processes:
        process.wait()


def test_two_workers_train_efficient_capsnet_to_identical_weights(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(200, seed=0),
                                 synthetic_digits(40, seed=1))
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes, logs = [], []
    try:
        for index in range(2):
            env = dict(
                os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
                TF_CONFIG=json.dumps({"cluster": cluster, "task": {
                    "type": "worker", "index": index}}))
            log = open(tmp_path / f"worker{index}.log", "w")
            logs.append(log)
            processes.append(subprocess.Popen(
                [sys.executable, "-c", _DRIVER,
                 str(tmp_path / f"weights{index}.npz"),
                 "train", "--strategy", "multi_worker", "--dataset", "mnist",
                 "--data-dir", data_dir,
                 "--output-dir", str(tmp_path / f"run{index}"),
                 "--epochs", "1", "--batch-size", "16", "--seed", "3"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.time() + TIMEOUT_SECONDS
        while (time.time() < deadline
               and any(p.poll() is None for p in processes)):
            if any(p.poll() not in (None, 0) for p in processes):
                break  # One failed: the other would wait for it forever.
            time.sleep(0.5)
        codes = [p.poll() for p in processes]
    finally:
        _stop(processes)
        for log in logs:
            log.close()
    outputs = "\n".join(
        f"--- worker {i} ---\n" + (tmp_path / f"worker{i}.log").read_text()[
            -3000:] for i in range(2))
    if codes != [0, 0]:
        pytest.fail(f"workers ended with {codes} (None: still running after "
                    f"{TIMEOUT_SECONDS} s, then killed)\n{outputs}")

    chief, other = (np.load(tmp_path / f"weights{i}.npz") for i in range(2))
    assert chief.files == other.files
    trainable = [key for key in chief.files if key.endswith(":trainable")]
    assert len(trainable) == 26  # Every kernel, bias, gamma, beta, prior.
    for key in trainable:
        np.testing.assert_array_equal(chief[key], other[key], err_msg=key)
    for key in set(chief.files) - set(trainable):
        if key.endswith("/temperature:state"):  # The routing temperature.
            np.testing.assert_array_equal(chief[key], other[key],
                                          err_msg=key)
            continue
        assert "batch_norm" in key, key  # Moving statistics.
        assert np.all(np.isfinite(other[key])), key

    record = json.loads((tmp_path / "run0" / "metrics.json").read_text())
    assert record["strategy"] == "MultiWorkerMirroredStrategy"
    assert record["num_replicas"] == 2
    assert np.isfinite(record["test"]["loss"])
    with open(tmp_path / "run0" / "history.csv") as file:
        assert len(file.read().splitlines()) == 2  # Header and one epoch.
    for name in ("model.keras", "export/saved_model.pb",
                 "checkpoints/best.keras"):
        assert (tmp_path / "run0" / name).exists(), name
    # Only the chief writes: the other worker's folder is left empty.
    leftovers = sorted(str(p.relative_to(tmp_path / "run1"))
                       for p in (tmp_path / "run1").rglob("*"))
    assert leftovers == []
