"""TensorFlow runtime failures reach the user as one line (#27).

A corrupt data file read lazily inside `fit` (`DataLossError`), a peer of
a multi-worker run that dies during training (`UnavailableError`) and
exhausted memory are the environment, not a bug: `keras-caps` prints one
line with what it means and what the run kept, and exits with status 1.
Any other TensorFlow error keeps its traceback.
"""

import pytest
import tensorflow as tf

from keras_caps import cli
from keras_caps.cli import train_command

TRAIN_ARGUMENTS = ["train", "--dataset", "mnist", "--output-dir"]


def _train_failing_with(monkeypatch, error):
    def failing_train(args):
        raise error

    monkeypatch.setattr(train_command, "run_train", failing_train)


@pytest.mark.single_backend
@pytest.mark.parametrize("error, meaning", [
    (tf.errors.DataLossError(None, None, "corrupted record at 1024"),
     "a data file is corrupt or truncated"),
    (tf.errors.UnavailableError(None, None, "Socket closed\n  more"),
     "a worker of the run stopped answering"),
    (tf.errors.ResourceExhaustedError(None, None, "OOM when allocating"),
     "memory ran out"),
])
def test_runtime_failures_are_one_line_with_what_was_kept(
        monkeypatch, tmp_path, capsys, error, meaning):
    _train_failing_with(monkeypatch, error)
    status = cli.main(TRAIN_ARGUMENTS + [str(tmp_path / "run")])
    assert status == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("keras-caps train: error: ")
    assert meaning in line
    assert type(error).__name__ in line
    assert " ".join(error.message.split()) in line
    # What train's interrupt describer says about the (empty) folder.
    assert "run the same command" in line or "nothing" in line.lower()


@pytest.mark.single_backend
def test_other_tensorflow_errors_keep_their_traceback(monkeypatch,
                                                      tmp_path):
    error = tf.errors.InvalidArgumentError(None, None, "a bug")
    _train_failing_with(monkeypatch, error)
    with pytest.raises(tf.errors.InvalidArgumentError):
        cli.main(TRAIN_ARGUMENTS + [str(tmp_path / "run")])
