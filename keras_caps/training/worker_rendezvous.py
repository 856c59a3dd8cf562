"""Waiting for the other workers of a cluster, with a limit and in Python.

`tf.distribute.MultiWorkerMirroredStrategy()` blocks inside TensorFlow,
holding the interpreter, until every worker has joined: a peer that never
starts makes it wait silently and forever, and TensorFlow's own SIGTERM
handler swallows the signals meant to stop it. `wait_for_workers` runs
first: it listens on this worker's cluster port and greets every peer on
theirs until all have started and greeted it back, logging
which workers it waits for, raising `WorkersNotReadyError` after `timeout`
seconds and leaving with exit status 128 + the signal on SIGTERM or SIGINT.
The port is released before TensorFlow's server binds it.
"""

import logging
import signal
import socket
import threading
import time

_COORDINATED_JOBS = ("chief", "worker")


class WorkersNotReadyError(TimeoutError):
    """Some workers of the cluster did not start in time."""


def wait_for_workers(cluster, task_type, task_id, timeout,
                     poll_seconds=0.5, log_seconds=10.0):
    """Blocks until every other chief and worker of `cluster` has started.

    Args:
        cluster: dict. `TF_CONFIG`'s `cluster`, e.g.
            `{"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}`.
        task_type: str. This task's type (`"chief"` or `"worker"`; other
            tasks, such as an evaluator, do not wait).
        task_id: int. This task's index.
        timeout: float. Seconds to wait before raising.
        poll_seconds: float. Seconds between two polls of the peers.
        log_seconds: float. Seconds between two "waiting for" log lines.

    Raises:
        WorkersNotReadyError: when a peer has not started after `timeout`
            seconds; the message names the missing workers.

    Example:

    ```python
    wait_for_workers({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]},
                     "worker", 0, timeout=600)
    ```
    """
    if task_type not in _COORDINATED_JOBS:
        return
    peers = {
        f"{job} {index}": address
        for job in _COORDINATED_JOBS
        for index, address in enumerate(cluster.get(job, []))
        if (job, index) != (task_type, task_id)}
    if not peers:
        return
    own_address = cluster[task_type][task_id]
    own_name = f"{task_type} {task_id}"
    listener = _listen(own_address)
    handlers = _stop_on_signals()
    # A worker leaves once it has greeted every peer *and* been greeted by
    # every peer: a peer that still waits has then already reached it, so
    # closing its port (for TensorFlow's server) never strands one.
    greeted, heard = set(), set()
    try:
        start = last_log = time.monotonic()
        logging.info("Waiting for workers to start: %s", _describe(peers))
        while True:
            heard.update(_read_greetings(listener))
            for name, address in peers.items():
                if name not in greeted and _greet(address, own_name):
                    greeted.add(name)
            waiting = {name: address for name, address in peers.items()
                       if name not in greeted or name not in heard}
            if not waiting:
                logging.info("All %d workers have started.", len(peers) + 1)
                return
            now = time.monotonic()
            if now - start >= timeout:
                raise WorkersNotReadyError(
                    f"Timed out after {timeout:g} s waiting for workers to "
                    f"start: {_describe(waiting)} (this is {own_name} at "
                    f"{own_address}). Start them with the same command and "
                    "their own TF_CONFIG, check the addresses in TF_CONFIG, "
                    "or raise `--worker-timeout`.")
            if now - last_log >= log_seconds:
                logging.info("Still waiting (%.0f s of %g s) for workers to "
                             "start: %s", now - start, timeout,
                             _describe(waiting))
                last_log = now
            time.sleep(poll_seconds)
    finally:
        listener.close()
        _restore(handlers)


def _describe(workers):
    return ", ".join(f"{name} at {address}"
                     for name, address in sorted(workers.items()))


def _split(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _listen(address):
    _, port = _split(address)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("", port))
    except OSError as error:
        listener.close()
        raise OSError(
            error.errno, f"This worker's port {port} (from TF_CONFIG, "
            f"{address}) is not free: {error.strerror}") from None
    listener.listen(64)
    listener.setblocking(False)
    return listener


def _read_greetings(listener):
    """The names in the greetings waiting on `listener`."""
    names = set()
    while True:
        try:
            connection, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return names
        with connection:
            connection.settimeout(1.0)
            try:
                names.add(connection.recv(256).decode("utf-8", "replace"))
            except OSError:
                pass


def _greet(address, own_name):
    """Sends this worker's name to `address`; whether it was accepted."""
    try:
        with socket.create_connection(_split(address), timeout=1.0) as peer:
            peer.sendall(own_name.encode("utf-8"))
        return True
    except OSError:
        return False


def _stop_on_signals():
    """SIGTERM and SIGINT end the process (status 128 + signal) while waiting.

    Returns the previous handlers, or `None` outside the main thread (where
    Python cannot set handlers).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        name = signal.Signals(signum).name
        logging.error("Stopped by %s while waiting for workers.", name)
        raise SystemExit(128 + signum)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, stop)
    return previous


def _restore(handlers):
    for signum, handler in (handlers or {}).items():
        signal.signal(signum, handler)
