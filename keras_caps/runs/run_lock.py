"""One training run per output folder at a time: a lock file.

Two runs writing into one folder corrupt each other's HDF5 backups and
checkpoints. `RunLock` takes `<folder>/run.lock` before a run writes
anything: the file names the owner (pid, host, start time) and is held
with `fcntl.flock`, which the kernel releases when the owner dies, even by
SIGKILL. A second run on the folder stops at once, naming the owner. A lock
left by a dead process on this host (a stale lock) is taken over, with a
log line; a lock from another host is only taken over when `flock` says it
is free *and* the file is not held: on a shared file system without
working `flock`, delete the file by hand once no run uses the folder.
"""

import datetime
import json
import logging
import os
import socket

try:
    import fcntl
except ImportError:  # Windows: the recorded pid alone decides.
    fcntl = None

LOCK_NAME = "run.lock"


class RunLock:
    """An exclusive lock on a training run's output folder.

    Use it as a context manager; it raises `RuntimeError` subclass
    `FolderInUseError` when another live process holds the folder.

    Args:
        folder: str. The output folder (created if missing).

    Example:

    ```python
    with RunLock("runs/mnist"):
        ...  # Only this process writes into runs/mnist.
    ```
    """

    def __init__(self, folder):
        self.folder = folder
        self.path = os.path.join(folder, LOCK_NAME)
        self._fd = None

    def acquire(self):
        os.makedirs(self.folder, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if not self._lock(fd):
                    owner = _read_owner(self.path)
                    raise FolderInUseError(self.folder, owner)
                if fcntl is not None and not _same_file(fd, self.path):
                    # The previous owner removed the file between our open
                    # and our flock: lock the new file instead.
                    os.close(fd)
                    continue
                owner = _read_owner(self.path)
                if owner and not _is_stale(owner):
                    raise FolderInUseError(self.folder, owner)
                if owner:
                    logging.info(
                        "Taking over the stale lock of %s (pid %s on %s, no "
                        "longer running).", self.folder, owner.get("pid"),
                        owner.get("host"))
                _write_owner(fd)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return self

    def release(self):
        if self._fd is None:
            return
        try:
            os.remove(self.path)  # Before unlocking: see `_same_file`.
        except OSError:
            pass
        os.close(self._fd)  # Releases the flock.
        self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()

    @staticmethod
    def _lock(fd):
        if fcntl is None:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


class FolderInUseError(RuntimeError):
    """Another live run holds the output folder."""

    def __init__(self, folder, owner):
        owner = owner or {}
        super().__init__(
            f"The output folder {folder!r} is in use by another training run "
            f"(pid {owner.get('pid', '?')} on host "
            f"{owner.get('host', '?')}, started {owner.get('started', '?')})."
            f" Wait for it to end or use another `--output-dir`. If no run "
            f"uses the folder, delete {os.path.join(folder, LOCK_NAME)!r}.")
        self.folder = folder
        self.owner = owner


def _read_owner(path):
    try:
        with open(path) as file:
            owner = json.load(file)
    except (OSError, ValueError):
        return None  # Empty: its writer died before writing, or none yet.
    return owner if isinstance(owner, dict) else None


def _write_owner(fd):
    owner = {"pid": os.getpid(), "host": socket.gethostname(),
             "started": datetime.datetime.now(datetime.timezone.utc)
             .isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(owner).encode())
    os.fsync(fd)


def _is_stale(owner):
    """Whether a lock's recorded owner is certainly no longer running.

    Reached only once `flock` succeeded (or without `fcntl`): on this host
    a live owner would hold the flock, so only a dead pid (or our own, from
    an earlier lock of this process) is stale; another host's owner cannot
    be checked and is treated as live.
    """
    if owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return fcntl is not None  # Alive, but flock says it holds nothing.
    return fcntl is not None  # Alive but not holding the flock: pid reuse.


def _same_file(fd, path):
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
