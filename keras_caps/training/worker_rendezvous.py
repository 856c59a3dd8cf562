"""Waiting for the other workers of a cluster, with a limit and in Python.

`tf.distribute.MultiWorkerMirroredStrategy()` waits inside TensorFlow
until every worker has joined: a peer that never starts makes it wait
silently and forever. `wait_for_workers` runs first: it listens on this
worker's cluster port and greets every peer on theirs until all have
started and greeted it back, logging which workers it waits for, raising
`WorkersNotReadyError` after `timeout` seconds and leaving with exit status
128 + the signal on SIGTERM or SIGINT. The port is released before
TensorFlow's server binds it.

A peer can still stop after greeting, leaving TensorFlow to wait for it
inside C++, where the main thread runs no Python code (signal handlers
included). `watch_startup` bounds that start-up by the same timeout and
keeps SIGTERM and SIGINT effective: a watchdog thread names the workers
that no longer answer and ends the process. That thread needs TensorFlow
to release the interpreter while it waits, which the training recipe's
strategy ensures (see `strategy._without_coordination_service`).
"""

import contextlib
import logging
import os
import select
import signal
import socket
import sys
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
    peers = _peers(cluster, task_type, task_id)
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


def _peers(cluster, task_type, task_id):
    """`{"worker 1": address}` of the other chiefs and workers to wait for.

    Empty for tasks that do not wait (an evaluator, say).
    """
    if task_type not in _COORDINATED_JOBS:
        return {}
    return {
        f"{job} {index}": address
        for job in _COORDINATED_JOBS
        for index, address in enumerate(cluster.get(job, []))
        if (job, index) != (task_type, task_id)}


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


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def watch_startup(cluster, task_type, task_id, timeout, poll_seconds=0.1):
    """Ends the process when the cluster's start-up in TensorFlow hangs.

    Wrap the creation of `tf.distribute.MultiWorkerMirroredStrategy` in it,
    after `wait_for_workers`: a peer that greeted and then stopped makes
    TensorFlow wait for it forever, inside C++, where Python code (signal
    handlers included) does not run. Meanwhile a watchdog thread:

    - after `timeout` seconds, logs one error line naming the peers whose
      port no longer answers (all peers when every port answers) and ends
      the process with exit status 1;
    - on SIGTERM or SIGINT, logs which and ends the process with exit
      status 128 + the signal.

    The thread runs only while TensorFlow releases the interpreter as it
    waits: TensorFlow's coordination service does not (its start-up
    barrier holds it) and takes SIGTERM over, so start the strategy
    without it (as `get_strategy` does).

    Nothing is left to clean up at that point (the training recipe writes
    nothing and holds no lock before its strategy exists), so the process
    ends without unwinding the main thread. Signals are watched only when
    this runs in the main thread (where Python lets handlers be set).

    Args:
        cluster: dict. `TF_CONFIG`'s `cluster`.
        task_type: str. This task's type (other tasks than `"chief"` and
            `"worker"` are not watched).
        task_id: int. This task's index.
        timeout: float. Seconds the start-up may take.
        poll_seconds: float. Seconds between two checks of the watchdog.

    Example:

    ```python
    cluster = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}
    wait_for_workers(cluster, "worker", 0, timeout=600)
    with watch_startup(cluster, "worker", 0, timeout=600):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ```
    """
    peers = _peers(cluster, task_type, task_id)
    if not peers or task_type not in cluster:
        yield
        return
    own = f"{task_type} {task_id} at {cluster[task_type][task_id]}"
    logging.info("Starting TensorFlow's multi-worker runtime (at most %g s).",
                 timeout)
    with _StartupWatchdog(peers, own, timeout, poll_seconds):
        yield


class _StartupWatchdog:
    """The daemon thread of `watch_startup` and the signal set-up it needs.

    While it runs, SIGTERM's and SIGINT's Python handlers do nothing
    themselves: the interpreter's C-level handler, which runs whatever the
    main thread does, writes the signal's number to a socket (Python's
    wakeup fd), and the thread, waiting on that socket, ends the process.
    """

    def __init__(self, peers, own, timeout, poll_seconds):
        self._peers, self._own = peers, own
        self._timeout, self._poll_seconds = timeout, poll_seconds
        self._stopping = threading.Event()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_writer.setblocking(False)
        self._previous = None  # Python handlers and wakeup fd, to restore.
        self._deadline = None
        self._thread = threading.Thread(
            target=self._watch, name="keras_caps-startup-watchdog",
            daemon=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            handlers = {signum: signal.signal(signum, _left_to_watchdog)
                        for signum in _STOP_SIGNALS}
            wakeup = signal.set_wakeup_fd(self._wake_writer.fileno(),
                                          warn_on_full_buffer=False)
            self._previous = handlers, wakeup
        self._deadline = time.monotonic() + self._timeout
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        if self._previous is not None:
            handlers, wakeup = self._previous
            # Handlers first: a signal that comes before the wakeup fd is
            # restored still wakes the thread, which ends the process.
            _restore(handlers)
            signal.set_wakeup_fd(wakeup)
        self._stopping.set()
        self._thread.join()
        self._wake_reader.close()
        self._wake_writer.close()
        return False

    def _watch(self):
        while True:
            stopping = self._stopping.is_set()
            wait = 0.0 if stopping else max(0.0, min(
                self._poll_seconds, self._deadline - time.monotonic()))
            readable, _, _ = select.select([self._wake_reader], [], [], wait)
            if readable:
                self._stop_on_signal(self._wake_reader.recv(64))
            if stopping:
                return
            if time.monotonic() >= self._deadline:
                self._time_out()

    def _stop_on_signal(self, signal_numbers):
        for signum in signal_numbers:
            if signum in _STOP_SIGNALS:
                _exit_now(
                    f"Stopped by {signal.Signals(signum).name} while "
                    "TensorFlow's multi-worker runtime was starting (this is "
                    f"{self._own}).", 128 + signum)

    def _time_out(self):
        silent = {name: address for name, address in self._peers.items()
                  if not _answers(address)}
        named = (f"not answering: {_describe(silent)}" if silent else
                 f"every port answers, but some of {_describe(self._peers)} "
                 "did not join")
        _exit_now(
            f"Timed out after {self._timeout:g} s waiting for TensorFlow's "
            f"multi-worker start-up (this is {self._own}); {named}. A worker "
            "that stops after the workers have greeted each other leaves "
            "the others waiting: stop every worker and start them all "
            "again with the same command, or raise `--worker-timeout`.", 1)


def _left_to_watchdog(signum, frame):
    """SIGTERM's and SIGINT's Python handler while `_StartupWatchdog` runs."""


def _exit_now(message, status):
    """Logs `message` and ends the process with `status`, from any thread.

    `os._exit`, because the main thread is held inside TensorFlow's C++
    code: it would never see an exception, and `sys.exit` in this thread
    would end only this thread.
    """
    logging.error("%s", message)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(status)


def _answers(address):
    """Whether something accepts connections at `address`."""
    try:
        with socket.create_connection(_split(address), timeout=1.0):
            return True
    except OSError:
        return False
