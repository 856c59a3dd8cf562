"""Each model of `keras-caps compare` in a process of its own.

`train_and_evaluate_in_a_process(task)` runs
`keras_caps.compare.model_runs.train_and_evaluate(**task)` in a child
Python process and turns its end into one outcome of the parent
(`train_and_evaluate_in_processes(tasks, workers)`: several at once, see
`compare(workers=...)`):

- success: returns;
- the child's own error (bad data, a full disk, its folder in use by
  another run): the child sends the error's one-line text through a pipe
  and exits without a traceback; the parent raises it, naming the model
  (`ValueError` for bad input, `OSError` for the environment);
- the child killed by a signal (SIGKILL, the OOM killer): `OSError`
  naming the model and the signal;
- Ctrl-C: SIGINT reaches the child from the terminal (the whole
  foreground process group) or from the parent, which passes it on when
  only the parent received it; the child stops without a traceback and
  releases its run's lock, then the parent raises `KeyboardInterrupt`.

Children die with their parent. On Linux the child asks the kernel for
SIGKILL when its parent dies (`prctl(PR_SET_PDEATHSIG)`), so a parent
killed by SIGKILL or SIGTERM never leaves a child training and holding
`run.lock`; the child checks that the parent still lives once the request
is made, closing the window of its start-up. Elsewhere on POSIX (macOS) a
daemon thread of the child polls its parent's pid every second and ends
the child when the parent is gone. On Windows neither exists: a child may
finish its model after its parent was killed (its lock then ends with
it).
"""

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from keras_caps.jax_gc_callback import remove_unused_jax_gc_callback

# <linux/prctl.h>
_PR_SET_PDEATHSIG = 1
# Seconds the parent waits, after Ctrl-C, for the child to stop by itself
# (the terminal sends SIGINT to both), then after passing SIGINT on.
_GRACE_SECONDS = 1.0
_STOP_SECONDS = 30.0
# The most bytes of an error's text a child sends (a pipe holds 64 KiB).
_MAX_REPORT_BYTES = 8192
# Exit statuses of a child, as `keras-caps` uses them.
_BAD_INPUT, _ENVIRONMENT, _INTERRUPTED = 2, 1, 130
# A child's program: Ctrl-C while it imports keras_caps (and TensorFlow)
# ends it quietly too.
_BOOTSTRAP = f"""import sys
try:
    from {__name__} import _main
except KeyboardInterrupt:
    sys.exit({_INTERRUPTED})
sys.exit(_main(sys.argv[1:]))
"""


def train_and_evaluate_in_a_process(task):
    """`model_runs.train_and_evaluate(**task)` in a child process.

    Args:
        task: dict. The arguments of `train_and_evaluate` by name, with
            `"settings"` as its record (`TrainingSettings.to_record()`).

    Raises:
        ValueError: the child refused its input (e.g. unreadable data).
        OSError: the child failed for its environment (a full disk, its
            folder in use) or was killed by a signal.
        KeyboardInterrupt: Ctrl-C; the child has stopped.
    """
    child = _Child(task)
    try:
        status = _wait(child.process)
    finally:
        report = child.close()
    if status:
        _raise_failure(child.model, status, report)


def train_and_evaluate_in_processes(tasks, workers, poll_seconds=0.1):
    """Each task as `train_and_evaluate_in_a_process`, `workers` at once.

    The tasks start in order, one as soon as another ends. Each child's
    TensorFlow gets an equal share of this machine's cores (its intra-op
    threads; `TF_NUM_INTRAOP_THREADS` and `TF_NUM_INTEROP_THREADS` set in
    the environment are kept). After a failure no task starts any more;
    the running ones finish (their models are kept) and the first
    failure is raised. Ctrl-C stops every running child, then raises
    `KeyboardInterrupt`.

    Args:
        tasks: list of dict. Tasks of `train_and_evaluate_in_a_process`.
        workers: int. How many children run at once.
        poll_seconds: float. How often the children are looked at.

    Raises:
        ValueError, OSError, KeyboardInterrupt: as
            `train_and_evaluate_in_a_process`, for the first child that
            failed.
    """
    waiting, running, failure = list(tasks), [], None
    threads = max(1, (os.cpu_count() or 1) // workers)
    try:
        while waiting or running:
            while waiting and len(running) < workers and failure is None:
                running.append(_Child(waiting.pop(0), threads))
            for child in [child for child in running
                          if child.process.poll() is not None]:
                running.remove(child)
                failure = failure or _failure_of(child)
            if failure is not None and not running:
                break
            time.sleep(poll_seconds)
    except KeyboardInterrupt:
        for child in running:
            _stop_quietly(child.process)
            child.close()
        raise
    if failure is not None:
        raise failure


class _Child:
    """A started child process of one task, with its report pipe."""

    def __init__(self, task, threads=None):
        self.model = (f"model {task['router']!r} with seed "
                      f"{task['settings']['seed']}")
        read_end, write_end = (os.pipe() if os.name == "posix"
                               else (None, None))
        arguments = json.dumps({"task": task, "parent_pid": os.getpid(),
                                "report_fd": write_end})
        try:
            self.process = subprocess.Popen(  # noqa: S603 (our own module)
                [sys.executable, "-c", _BOOTSTRAP, arguments],
                env=_child_env(threads),
                pass_fds=() if write_end is None else (write_end,))
        except BaseException:
            if read_end is not None:
                os.close(read_end)
            raise
        finally:
            if write_end is not None:
                os.close(write_end)
        self._read_end = read_end

    def close(self):
        """Reads the child's report (`None` if none) and closes the pipe;
        call once the child has ended."""
        if self._read_end is None:
            return None
        try:
            return _read_report(self._read_end)
        finally:
            os.close(self._read_end)
            self._read_end = None


def _failure_of(child):
    """The exception for an ended child (`None` if it succeeded)."""
    report = child.close()
    status = child.process.returncode
    if not status:
        return None
    try:
        _raise_failure(child.model, status, report)
    except (OSError, ValueError, KeyboardInterrupt) as error:
        return error
    return None


def _stop_quietly(process):
    """`_stop`, killing the child at once on a second Ctrl-C."""
    try:
        _stop(process)
    except KeyboardInterrupt:
        pass
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _child_env(threads=None):
    """The environment of a child: it imports this very keras_caps,
    installed or not; with `threads`, TensorFlow's intra-op threads (and
    one inter-op thread) unless the environment sets them."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root if not path
           else package_root + os.pathsep + path}
    if threads is not None:
        env.setdefault("TF_NUM_INTRAOP_THREADS", str(threads))
        env.setdefault("TF_NUM_INTEROP_THREADS", "1")
    return env


def _wait(process):
    """The child's exit status; on Ctrl-C, stops it first."""
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            _stop(process)
        finally:  # A second Ctrl-C: no waiting any more.
            if process.poll() is None:
                process.kill()
                process.wait()
        raise


def _stop(process):
    """Stops an interrupted child: it received SIGINT with the parent
    (terminal) or receives it now (SIGINT sent to the parent alone); it
    is killed if it has not stopped after `_STOP_SECONDS`."""
    try:
        process.wait(_GRACE_SECONDS)
        return
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _read_report(read_end):
    if read_end is None:
        return None
    chunks = []
    while chunk := os.read(read_end, _MAX_REPORT_BYTES):
        chunks.append(chunk)
    if not chunks:
        return None
    try:
        return json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError:
        return None


def _raise_failure(model, status, report):
    """Raises the parent's error for a child that ended with `status`."""
    again = ("Finished models are kept; run the same command again to "
             "resume")
    if status in (_INTERRUPTED, -signal.SIGINT):
        raise KeyboardInterrupt
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:  # A signal Python has no name for (real-time).
            name = f"signal {-status}"
        raise OSError(
            f"Training or evaluating the {model} failed: its process was "
            f"killed by {name}. {again} (this model from its last "
            "backup).")
    if report is not None:
        error = ValueError if report["kind"] == "bad_input" else OSError
        raise error(f"Training or evaluating the {model} failed: "
                    f"{report['message']}")
    raise OSError(
        f"Training or evaluating the {model} failed in its process (exit "
        f"status {status}); its output is above. {again}.")


def _die_with_parent(parent_pid):
    """Ends this process when the process `parent_pid` ends."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0):
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != parent_pid:  # Died before the request.
            os._exit(_ENVIRONMENT)
    elif os.name == "posix":
        threading.Thread(target=_watch_parent, args=(parent_pid,),
                         daemon=True).start()


def _watch_parent(parent_pid):
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    # `os._exit` ends the process even while TensorFlow holds the main
    # thread in C++, where no Python signal handler would run.
    os._exit(_ENVIRONMENT)


def _report(report_fd, kind, message):
    """Sends the parent `{"kind": kind, "message": message}`, or prints
    the message where there is no pipe (Windows)."""
    if report_fd is None:
        print(f"keras-caps compare: error: {message}", file=sys.stderr)
        return
    os.write(report_fd, _report_bytes(kind, message))


def _report_bytes(kind, message):
    """The report as JSON of at most `_MAX_REPORT_BYTES` bytes: a long
    message is cut (never the JSON, which the parent could not read)."""
    length = len(message)
    while True:
        text = message if length == len(message) else (
            message[:length] + " [...]")
        data = json.dumps({"kind": kind, "message": text}).encode("utf-8")
        if len(data) <= _MAX_REPORT_BYTES:
            return data
        # Each character takes 1 to 12 bytes of JSON (escaped).
        length = min(length - 1,
                     length * _MAX_REPORT_BYTES // len(data) - 16)


def _one_line(error):
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.strerror}: {error.filename!r}"
    return " ".join(str(error).split())


def _main(argv):
    """Entry point of a model's own process (see
    `train_and_evaluate_in_a_process`): `argv[0]` is a JSON object with
    the task, the parent's pid and the pipe's file descriptor."""
    arguments = json.loads(argv[0])
    report_fd = arguments["report_fd"]
    if report_fd is not None:  # Not for the processes TensorFlow starts.
        os.set_inheritable(report_fd, False)
    _die_with_parent(arguments["parent_pid"])
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    interrupted = _InterruptRecorder()
    try:
        _run_task(arguments["task"])
    except KeyboardInterrupt:
        return _stop_quietly()
    except Exception as error:
        if interrupted.received:
            # Ctrl-C landed in library code (TensorFlow's C++ calling back
            # into Python) that turned the `KeyboardInterrupt` into
            # another error: still an interrupt, not a failure.
            return _stop_quietly()
        return _failure_status(report_fd, error)
    finally:
        interrupted.restore()
    return 0


def _stop_quietly():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return _INTERRUPTED


class _InterruptRecorder:
    """While installed, SIGINT is Python's `KeyboardInterrupt` as usual,
    and `received` says whether one came. A `KeyboardInterrupt` raised
    where Python cannot propagate it (a finalizer, a gc callback) is not
    printed as "Exception ignored ... Traceback": the SIGINT is recorded,
    and the parent passes SIGINT on again if the child keeps running."""

    def __init__(self):
        self.received = False
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._previous_hook = sys.unraisablehook
        sys.unraisablehook = self._unraisable

    def _handle(self, signum, frame):
        self.received = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self._previous_hook(unraisable)

    def restore(self):
        sys.unraisablehook = self._previous_hook
        if signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._previous)


def _failure_status(report_fd, error):
    """The exit status of a task that raised `error` (not an interrupt),
    reported to the parent; re-raises a bug, whose traceback is printed."""
    from keras_caps.runs.run_lock import FolderInUseError

    if isinstance(error, (ValueError, FileNotFoundError)):
        _report(report_fd, "bad_input", _one_line(error))
        return _BAD_INPUT
    if isinstance(error, (OSError, FolderInUseError)):
        _report(report_fd, "environment", _one_line(error))
        return _ENVIRONMENT
    failure = None
    if not isinstance(error, RuntimeError):
        from keras_caps.training import runtime_failures

        failure = runtime_failures.describe_runtime_failure(error)
    if failure is None:  # A bug: its traceback is printed.
        raise error
    _report(report_fd, "environment", failure)
    return _ENVIRONMENT


def _run_task(task):
    from keras_caps.compare.model_runs import train_and_evaluate
    from keras_caps.training.training_settings import TrainingSettings

    remove_unused_jax_gc_callback()  # TensorFlow, imported now, loads JAX.
    task = {**task,
            "settings": TrainingSettings.from_record(task["settings"])}
    train_and_evaluate(**task)
