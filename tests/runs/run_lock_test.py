"""`RunLock` against a second, real process (#16)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from keras_caps import cli
from keras_caps.runs.run_lock import FolderInUseError
from keras_caps.runs.run_lock import RunLock

# Loads run_lock.py by path (standard library only): no TensorFlow import,
# so the holder starts in a fraction of a second.
_HOLDER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("run_lock", sys.argv[1])
run_lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_lock)
with run_lock.RunLock(sys.argv[2]):
    print("locked", flush=True)
    time.sleep(120)
"""


def _start_holder(folder):
    from keras_caps.runs import run_lock

    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, run_lock.__file__, str(folder)],
        stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_run_stops_at_once_and_a_stale_lock_is_taken_over(
        tmp_path, caplog, capsys):
    folder = tmp_path / "run"
    holder = _start_holder(folder)
    try:
        owner = json.loads((folder / "run.lock").read_text())
        assert owner["pid"] == holder.pid
        assert owner["host"] == socket.gethostname()
        with pytest.raises(FolderInUseError,
                           match=f"in use by another training run \\(pid "
                           f"{holder.pid} on host"):
            RunLock(str(folder)).acquire()
        # The command: one line, exit status 1, before touching anything.
        start = time.time()
        assert cli.main(["train", "--output-dir", str(folder),
                         "--epochs", "1"]) == 1
        assert time.time() - start < 10
        error = capsys.readouterr().err
        assert error.count("\n") == 1, error
        assert f"pid {holder.pid}" in error and "in use" in error
        assert sorted(os.listdir(folder)) == ["run.lock"]
    finally:
        holder.send_signal(signal.SIGKILL)  # Leaves run.lock behind.
        holder.wait()
        holder.stdout.close()
    assert json.loads((folder / "run.lock").read_text())["pid"] == holder.pid
    caplog.set_level("INFO")
    with RunLock(str(folder)):
        owner = json.loads((folder / "run.lock").read_text())
        assert owner["pid"] == os.getpid()
    assert f"stale lock of {folder} (pid {holder.pid}" in caplog.text
    assert os.listdir(folder) == []  # Released: the file is removed.


def test_a_dead_owners_lock_without_flock_is_stale(tmp_path):
    """A lock file naming a dead pid of this host (e.g. left on a file
    system where the flock was lost) is taken over; a live one is not."""
    dead = subprocess.run([sys.executable, "-c",
                           "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    lock = tmp_path / "run.lock"
    lock.write_text(json.dumps({"pid": int(dead),
                                "host": socket.gethostname()}))
    with RunLock(str(tmp_path)):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    lock.write_text(json.dumps({"pid": 1, "host": "another-host"}))
    with pytest.raises(FolderInUseError, match="pid 1 on host another-host"):
        RunLock(str(tmp_path)).acquire()
