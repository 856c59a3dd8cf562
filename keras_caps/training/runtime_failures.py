"""TensorFlow runtime failures that the environment causes, in one line.

A corrupt data file read lazily inside `fit` (`DataLossError`), a peer of
a multi-worker run that stopped answering (`UnavailableError`,
`DeadlineExceededError`) and exhausted memory (`ResourceExhaustedError`)
are the environment, not a bug: `keras-caps` and the processes of
`keras-caps compare` report them as one line saying what they mean and
what to do. Any other error is a bug and keeps its traceback.
"""

import sys

# TensorFlow's errors that the environment causes while data is read or a
# distributed step runs, with what they mean to a user.
_RUNTIME_FAILURES = {
    "DataLossError": "a data file is corrupt or truncated. If the data "
    "comes from TFDS, delete its prepared folder so that it is prepared "
    "again, or pass the --data-dir of a complete copy",
    "UnavailableError": "a worker of the run stopped answering (it died "
    "or its network failed); restart every worker with the same command",
    "ResourceExhaustedError": "memory ran out; use a smaller --batch-size",
    "DeadlineExceededError": "a worker of the run did not answer in time; "
    "restart every worker with the same command",
}


def describe_runtime_failure(error):
    """One line for a TensorFlow runtime failure of the environment.

    Does not import TensorFlow: an error can only be TensorFlow's when
    TensorFlow is already imported.

    Args:
        error: BaseException. The error to describe.

    Returns:
        str, what `error` means and what to do, ending with TensorFlow's
        own message; or `None` when `error` is not one of those failures.

    Example:

    ```python
    import tensorflow as tf

    describe_runtime_failure(
        tf.errors.ResourceExhaustedError(None, None, "OOM"))
    # 'memory ran out; use a smaller --batch-size (TensorFlow:
    #  ResourceExhaustedError: OOM).'
    ```
    """
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None or not isinstance(error,
                                            tensorflow.errors.OpError):
        return None
    meaning = _RUNTIME_FAILURES.get(type(error).__name__)
    if meaning is None:
        return None
    detail = " ".join(str(error.message).split())[:300]
    return f"{meaning} (TensorFlow: {type(error).__name__}: {detail})."
