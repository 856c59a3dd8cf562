"""Reading the JSON records a run or a comparison writes.

`run.json`, `metrics.json`, `robustness.json`, `compare.json` and
`results.json` are written atomically, but a user, a copy tool or a
failing disk can still leave one truncated or hand-edited. Reading one
through `read_json_record` turns a parse failure into an error that names
the file, so nobody has to guess which of a run's records is broken.
"""

import json
import logging
import os


class UnreadableRecordError(ValueError):
    """A JSON record of keras_caps that is missing its object or is not
    valid JSON. `path` is the file; the message names it too."""

    def __init__(self, path, reason):
        self.path = path
        self.reason = reason
        super().__init__(f"The record {path!r} is unreadable ({reason}).")


def read_json_record(path):
    """The JSON object in the file `path`.

    Args:
        path: str. A JSON file that holds one object.

    Returns:
        The object, a `dict`.

    Raises:
        FileNotFoundError: `path` does not exist.
        UnreadableRecordError: (a `ValueError`) the file is not valid
            UTF-8 JSON, or holds something other than an object; the
            message names `path`. Callers add what to do about it.
        OSError: the file exists but cannot be read (its path is in the
            error).

    Example:

    ```python
    try:
        settings = read_json_record("runs/mnist/run.json")["settings"]
    except UnreadableRecordError as error:
        print(error)  # Names runs/mnist/run.json and what is wrong.
    ```
    """
    try:
        with open(path, encoding="utf-8") as file:
            record = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableRecordError(path, f"not valid JSON: {error}") from None
    if not isinstance(record, dict):
        raise UnreadableRecordError(
            path, f"expected a JSON object, found {type(record).__name__}")
    return record


def read_record_made_with(path, settings, redo):
    """The record in `path` if its `"settings"` are `settings` (compared
    as JSON: tuples read back as lists); else `None`.

    A missing file, other settings or an unreadable file (logged with
    `redo`, what the caller does instead) all mean the work is done again.

    Example:

    ```python
    record = read_record_made_with(
        "runs/compare/models/dynamic_seed0/robustness.json", evaluation,
        "The model is evaluated again.")
    ```
    """
    if not os.path.exists(path):
        return None
    try:
        record = read_json_record(path)
    except UnreadableRecordError as error:
        logging.warning("%s %s", error, redo)
        return None
    if record.get("settings") != json.loads(json.dumps(settings)):
        return None
    return record
