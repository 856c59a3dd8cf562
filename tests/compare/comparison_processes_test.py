"""`keras-caps compare`'s model processes under real faults (#27, defects
7 and 15): a killed or failing child is one line naming the model, a
killed parent takes its child with it (the run lock is free at once),
Ctrl-C stops parent and child with one line and no traceback."""

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent import futures

import pytest

from keras_caps import cli
from keras_caps.compare import comparison
from keras_caps.compare import comparison_process
from keras_caps.runs.run_lock import RunLock
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.tiny_disk import tiny_disk

pytestmark = pytest.mark.single_backend

_MODEL = "'cnn' with seed 3"



def _ctrl_c_as_a_terminal_gives_it():
    """Run in the child before `exec`: SIGINT back to its default action.
    A suite started in the background by a non-interactive shell (`nohup
    ... &`) inherits SIGINT ignored, and Python then never raises
    `KeyboardInterrupt`; these tests send it as a terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def _flags(data_dir, output_dir):
    # Many short epochs: the model is still training (not done in the
    # second a slow, loaded machine may take to deliver a signal) when the
    # tests below kill or interrupt it.
    return ["compare", "--routers", "cnn", "--seeds", "3", "--epochs", "40",
            "--steps-per-epoch", "2", "--batch-size", "8",
            "--no-reconstruction", "--data-dir", str(data_dir),
            "--output-dir", str(output_dir)]


@pytest.fixture
def data_dir(tmp_path):
    return write_idx_dataset(str(tmp_path / "mnist"),
                             synthetic_digits(64, seed=0),
                             synthetic_digits(16, seed=1))


def _start(data_dir, output_dir, new_session=False):
    """`keras-caps compare` in a process (with its own process group when
    `new_session`, so that a signal can go to parent and child at once)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "KERAS_BACKEND": "tensorflow"}
    return subprocess.Popen(
        [sys.executable, "-m", "keras_caps.cli",
         *_flags(data_dir, output_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=new_session,
        preexec_fn=_ctrl_c_as_a_terminal_gives_it)


def _model_folder(output_dir):
    return comparison.run_dir(str(output_dir), "cnn", 3)


def _training_child(parent, output_dir, timeout=180):
    """The pid of `parent`'s child once it holds the model's run lock."""
    lock = os.path.join(_model_folder(output_dir), "run.lock")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if parent.poll() is not None:
            pytest.fail("compare ended before its child trained: "
                        + "".join(parent.communicate()))
        try:
            with open(lock) as file:
                pid = json.load(file)["pid"]
        except (OSError, ValueError, KeyError):
            pid = None
        if pid is not None and pid != parent.pid:
            return pid
        time.sleep(0.05)
    parent.kill()
    pytest.fail(f"no child took {lock} within {timeout} s")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid, seconds):
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _compare_lines(stderr):
    return [line for line in stderr.splitlines()
            if line.startswith("keras-caps compare:")]


def _model_finished(output_dir):
    return os.path.exists(os.path.join(_model_folder(output_dir),
                                       "metrics.json"))


def _assert_lock_free(output_dir):
    with RunLock(_model_folder(output_dir)):
        pass


def _kill_the_child(data_dir, output_dir):
    """The child is killed while training: one line naming the model."""
    parent = _start(data_dir, output_dir)
    os.kill(_training_child(parent, output_dir), signal.SIGKILL)
    stdout, stderr = parent.communicate(timeout=120)
    assert parent.returncode == 1, stderr
    assert "Traceback" not in stdout + stderr
    (line,) = _compare_lines(stderr)
    assert line.startswith("keras-caps compare: error: ")
    assert _MODEL in line and "killed by SIGKILL" in line
    assert "run the same command again" in line


def _kill_the_parent(data_dir, output_dir, signum):
    """The parent is killed: its child goes with it at once, unfinished,
    and the lock is free."""
    parent = _start(data_dir, output_dir)
    child = _training_child(parent, output_dir)
    os.kill(parent.pid, signum)
    parent.communicate(timeout=60)
    assert _wait_gone(child, 5), f"child outlived its parent ({signum})"
    assert not _model_finished(output_dir)  # Killed, not finished.
    _assert_lock_free(output_dir)


def _interrupt(data_dir, output_dir, to_group):
    """Ctrl-C, sent to the parent alone (it stops its child) or, as a
    terminal does, to the whole process group: one line saying what was
    kept, exit 130, no traceback from either process."""
    parent = _start(data_dir, output_dir, new_session=to_group)
    child = _training_child(parent, output_dir)
    if to_group:
        os.killpg(parent.pid, signal.SIGINT)
    else:
        os.kill(parent.pid, signal.SIGINT)
    stdout, stderr = parent.communicate(timeout=120)
    assert parent.returncode == 130, stderr
    assert "Traceback" not in stdout + stderr
    (line,) = _compare_lines(stderr)
    assert line.startswith("keras-caps compare: interrupted: ")
    assert str(output_dir) in line
    assert "run the same command again" in line
    assert not _alive(child)
    assert not _model_finished(output_dir)  # Stopped, not finished.
    _assert_lock_free(output_dir)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc")
def test_killed_child_killed_parent_and_ctrl_c(data_dir, tmp_path):
    # Three comparison folders at once, to share the processes' start-up
    # time; in each, every step after the first reruns the same command
    # (it takes the model's lock again and resumes).
    sequences = {
        "a": [_kill_the_child,
              functools.partial(_kill_the_parent, signum=signal.SIGKILL)],
        "b": [functools.partial(_kill_the_parent, signum=signal.SIGTERM),
              functools.partial(_interrupt, to_group=False)],
        "c": [functools.partial(_interrupt, to_group=True)],
    }

    def run(name, steps):
        for step in steps:
            step(data_dir, tmp_path / name)

    with futures.ThreadPoolExecutor(len(sequences)) as pool:
        running = [pool.submit(run, name, steps)
                   for name, steps in sequences.items()]
        for sequence in running:
            sequence.result()


def test_a_child_whose_folder_is_in_use_is_one_line(data_dir, tmp_path,
                                                    capfd):
    output_dir = tmp_path / "compare"
    lock = RunLock(_model_folder(output_dir))

    def take_the_model_folder():
        # Once compare has claimed its folder, before the child (which
        # imports TensorFlow first) reaches the model's.
        while not (output_dir / "compare.json").exists():
            time.sleep(0.005)
        lock.acquire()

    holder = threading.Thread(target=take_the_model_folder)
    holder.start()
    try:
        code = cli.main(_flags(data_dir, output_dir))
    finally:
        holder.join()
        lock.release()
    captured = capfd.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    (line,) = _compare_lines(captured.err)
    assert _MODEL in line and "is in use by another training run" in line


def test_a_child_on_a_full_disk_is_one_line(data_dir, tmp_path, capfd):
    # 256 KiB: compare.json fits, the model's checkpoints do not.
    disk = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    with tiny_disk(disk, "256k"):
        code = cli.main(_flags(data_dir, disk / "compare"))
        captured = capfd.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    (line,) = _compare_lines(captured.err)
    assert _MODEL in line and "No space left on device" in line


def _child_main(monkeypatch, error, task=None):
    """A child's `_main`, in this process, whose task raises `error` (or
    is `task`): its exit status, its report as the parent reads it, and
    whether the report pipe stayed inheritable."""
    def failing_task(task):
        raise error

    monkeypatch.setattr(comparison_process, "_die_with_parent",
                        lambda parent_pid: None)
    monkeypatch.setattr(comparison_process, "_run_task",
                        task or failing_task)
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # As `pass_fds` leaves it.
    try:
        status = comparison_process._main([json.dumps(
            {"task": {}, "parent_pid": os.getppid(),
             "report_fd": write_end})])
        inheritable = os.get_inheritable(write_end)
    finally:
        os.close(write_end)
    try:
        return status, comparison_process._read_report(read_end), inheritable
    finally:
        os.close(read_end)


def test_a_childs_tensorflow_runtime_failure_is_one_line(monkeypatch):
    import tensorflow as tf

    status, report, inheritable = _child_main(
        monkeypatch, tf.errors.ResourceExhaustedError(
            None, None, "OOM when allocating tensor"))
    assert status == 1 and not inheritable
    assert report["kind"] == "environment"
    assert report["message"].startswith("memory ran out")
    assert "ResourceExhaustedError: OOM when allocating tensor" in (
        report["message"])
    with pytest.raises(OSError, match=f"the model {_MODEL} failed: memory "
                       "ran out"):
        comparison_process._raise_failure(f"model {_MODEL}", status, report)


def test_ctrl_c_turned_into_another_error_stops_the_child_quietly(
        monkeypatch, capfd):
    """Ctrl-C landing where library code catches the `KeyboardInterrupt`
    and raises another error (TensorFlow's C++ calling back into Python
    can): the child still stops as interrupted, with no report and no
    traceback, not as a failure or a bug."""
    def interrupted_task(task):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # The handler raises here.
        except KeyboardInterrupt as interrupt:
            raise TypeError("Flatten: error in a callback") from interrupt

    handler = signal.getsignal(signal.SIGINT)
    try:
        status, report, _ = _child_main(monkeypatch, None,
                                        task=interrupted_task)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, handler)
    assert status == 130 and report is None
    captured = capfd.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_ctrl_c_in_a_finalizer_prints_no_traceback(monkeypatch, capfd):
    """A `KeyboardInterrupt` raised where Python cannot propagate it (a
    finalizer) is not printed as "Exception ignored"; the one that
    follows stops the child as interrupted."""
    class InterruptedFinalizer:
        def __del__(self):
            raise KeyboardInterrupt

    def task(task):
        InterruptedFinalizer()  # Finalized at once: an unraisable error.
        raise KeyboardInterrupt

    hook, handler = sys.unraisablehook, signal.getsignal(signal.SIGINT)
    try:
        status, report, _ = _child_main(monkeypatch, None, task=task)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert status == 130 and report is None
    assert sys.unraisablehook is hook
    captured = capfd.readouterr()
    assert "Exception ignored" not in captured.err
    assert "Traceback" not in captured.out + captured.err


def test_a_bug_in_a_child_still_raises_and_restores_sigint(monkeypatch):
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(ZeroDivisionError):
        _child_main(monkeypatch, ZeroDivisionError("a bug"))
    assert signal.getsignal(signal.SIGINT) == handler


def test_a_long_report_is_cut_but_stays_readable(monkeypatch):
    message = "disk \u00e9\U0001f4be " * 4000  # Escapes grow in JSON.
    status, report, _ = _child_main(monkeypatch, ValueError(message))
    assert status == 2 and report["kind"] == "bad_input"
    assert report["message"].endswith(" [...]")
    assert message.startswith(report["message"][:-len(" [...]")])
    assert len(report["message"]) > 300


def test_a_child_killed_by_an_unnamed_signal_is_named_by_number():
    with pytest.raises(OSError, match="killed by signal 40"):
        comparison_process._raise_failure(f"model {_MODEL}", -40, None)


def test_the_ctrl_c_line_mentions_a_backup_only_when_one_exists(tmp_path):
    from argparse import Namespace

    from keras_caps.cli import compare_command

    args = Namespace(output_dir=str(tmp_path), dataset="mnist")
    models = tmp_path / "models"
    line = compare_command._interrupted(args)
    assert line.startswith("0 trained model(s) are kept") and (
        "backup" not in line)
    (models / "cnn_seed0").mkdir(parents=True)
    (models / "cnn_seed0" / "metrics.json").write_text("{}")
    (models / "cnn_seed1").mkdir()  # Interrupted before its first backup.
    line = compare_command._interrupted(args)
    assert line.startswith("1 trained model(s) are kept") and (
        "backup" not in line)
    (models / "cnn_seed1" / "backup").mkdir()
    (models / "cnn_seed1" / "backup" / "latest.weights.h5").write_bytes(b"w")
    line = compare_command._interrupted(args)
    assert line.startswith("1 trained model(s) and the last backup of the "
                           "interrupted cnn_seed1 are kept in "
                           f"{str(models)!r}"), line
