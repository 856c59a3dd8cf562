"""Multi-worker start-up when a peer never starts: logs, timeout, signals.

The command runs in a subprocess with a two-worker `TF_CONFIG` of which
only worker 0 is started (#16: it used to wait silently forever and ignore
SIGTERM and SIGINT). `wait_for_workers` alone runs in a plain Python
subprocess (the module uses only the standard library).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from keras_caps.training import worker_rendezvous

_WAIT = """
import importlib.util, json, sys, logging
logging.basicConfig(level=logging.INFO, format="%(message)s")
spec = importlib.util.spec_from_file_location("rendezvous", sys.argv[1])
rendezvous = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rendezvous)
rendezvous.wait_for_workers(json.loads(sys.argv[2]), "worker",
                            int(sys.argv[3]), timeout=float(sys.argv[4]),
                            poll_seconds=0.05)
print("all started", flush=True)
"""


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _cluster():
    return {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}


def _train(cluster, tmp_path, timeout):
    worktree = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=worktree,
               CUDA_VISIBLE_DEVICES="", TF_CONFIG=json.dumps({
                   "cluster": cluster, "task": {"type": "worker",
                                                "index": 0}}))
    return subprocess.Popen(
        [sys.executable, "-m", "keras_caps.cli", "train", "--strategy",
         "multi_worker", "--output-dir", str(tmp_path / "run"),
         "--worker-timeout", str(timeout)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(cluster, index, timeout):
    return subprocess.Popen(
        [sys.executable, "-c", _WAIT, worker_rendezvous.__file__,
         json.dumps(cluster), str(index), str(timeout)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_missing_worker_is_named_and_times_out(tmp_path):
    cluster = _cluster()
    start = time.time()
    process = _train(cluster, tmp_path, timeout=2)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    missing = f"worker 1 at {cluster['worker'][1]}"
    assert f"Waiting for workers to start: {missing}" in err
    (line,) = [line for line in err.splitlines()
               if line.startswith("keras-caps train: error:")]
    assert f"Timed out after 2 s waiting for workers to start: {missing}" \
        in line and "--worker-timeout" in line, line
    assert time.time() - start < 60
    assert not (tmp_path / "run" / "run.json").exists()


def test_sigterm_stops_the_wait(tmp_path):
    process = _train(_cluster(), tmp_path, timeout=300)
    try:
        for line in process.stderr:  # Until it says it waits.
            if "Waiting for workers" in line:
                break
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM
    assert "Stopped by SIGTERM while waiting for workers" in err
    assert "Traceback" not in err


def test_sigint_stops_the_wait_and_the_port_is_released(tmp_path):
    cluster = _cluster()
    process = _wait(cluster, 0, timeout=300)
    try:
        assert "Waiting for workers" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGINT
    assert "Stopped by SIGINT" in err
    port = int(cluster["worker"][0].rsplit(":", 1)[1])
    with socket.socket() as again:  # Free for TensorFlow's server.
        again.bind(("127.0.0.1", port))


def test_workers_started_at_different_times_all_proceed():
    cluster = _cluster()
    first = _wait(cluster, 0, timeout=60)
    time.sleep(1.0)
    second = _wait(cluster, 1, timeout=60)
    errors = []
    for process in (first, second):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        assert out.strip() == "all started"
        errors.append(err)
    assert (f"Waiting for workers to start: worker 1 at "
            f"{cluster['worker'][1]}") in errors[0]
    assert "All 2 workers have started." in errors[1]


def _started(process):
    """Reads `process`'s stderr until the rendezvous is over; the lines."""
    lines = []
    for line in process.stderr:
        lines.append(line)
        if "All 2 workers have started." in line:
            return lines
    return lines


@pytest.mark.single_backend
def test_a_worker_that_greets_and_stops_is_named_and_times_out(tmp_path):
    """#27: TensorFlow used to wait for it forever, after the rendezvous."""
    cluster = _cluster()
    process = _train(cluster, tmp_path, timeout=3)
    peer = _wait(cluster, 1, timeout=60)  # Greets, then exits.
    try:
        started = _started(process)
        assert peer.communicate(timeout=60)[0].strip() == "all started"
        peer_gone = time.time()
        _, err = process.communicate(timeout=60)
        stopped_after = time.time() - peer_gone
    finally:
        for child in (process, peer):
            if child.poll() is None:
                child.kill()
                child.wait()
    err = "".join(started) + err
    assert process.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines()
               if line.startswith("Timed out after 3 s")]
    assert ("waiting for TensorFlow's multi-worker start-up (this is "
            f"worker 0 at {cluster['worker'][0]}); not answering: worker 1 "
            f"at {cluster['worker'][1]}.") in line, line
    assert "--worker-timeout" in line
    assert stopped_after < 3 + 15, stopped_after
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.single_backend
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_start_up_after_the_rendezvous(tmp_path, signum):
    """#27: TensorFlow held the interpreter and took SIGTERM over."""
    cluster = _cluster()
    process = _train(cluster, tmp_path, timeout=300)
    peer = _wait(cluster, 1, timeout=60)  # Greets, then exits.
    try:
        _started(process)
        peer.communicate(timeout=60)
        time.sleep(3)  # TensorFlow now waits for worker 1, in C++.
        process.send_signal(signum)
        signalled = time.time()
        _, err = process.communicate(timeout=20)
        stopped_after = time.time() - signalled
    finally:
        for child in (process, peer):
            if child.poll() is None:
                child.kill()
                child.wait()
    assert process.returncode == 128 + signum, err[-3000:]
    assert (f"Stopped by {signum.name} while TensorFlow's multi-worker "
            "runtime was starting (this is worker 0") in err
    assert "Traceback" not in err
    assert stopped_after < 5, stopped_after
