"""A comparison's folder: claimed for one comparison (its `compare.json`),
refused to another, and its records read with errors that name the file.
"""

import os

from keras_caps.compare.comparison_settings import with_normalization_defaults
from keras_caps.datasets.data_record import data_differences
from keras_caps.runs.atomic_files import write_json_atomically
from keras_caps.runs.record_files import UnreadableRecordError
from keras_caps.runs.record_files import read_json_record

SETTINGS_FILE = "compare.json"


def claim_output_dir(output_dir, settings):
    """Writes `compare.json`, or refuses a folder made with another recipe
    or other data.

    The routers may differ from the folder's: a comparison can be
    extended with a router (only its models train) or reported for a
    subset; every other setting, and the data, must be the same.

    Args:
        output_dir: str. The comparison's folder.
        settings: `ComparisonSettings`, resolved.
    """
    _claim(output_dir, settings.to_record())


def _claim(output_dir, record):
    """`claim_output_dir` for the settings' `compare.json` `record`."""
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.exists(path):
        previous = read_record(
            path, "It holds the comparison's settings: restore it, or use "
            "another --output-dir. Nothing was overwritten.")
        # `adapt_batchnorm` and the attacks change evaluations only, and
        # the equivalence margin the report only: they may differ (the
        # models are evaluated or reported again).
        report_only = ("attacks", "equivalence_margin")
        recipe = {key: value for key, value in
                  with_normalization_defaults(previous).items()
                  if key not in report_only}
        _check_same_comparison(output_dir, {
            **recipe, "adapt_batchnorm": record["adapt_batchnorm"],
            **{key: record[key] for key in report_only if key in record}},
            record)
        if previous != record:
            write_json_atomically(path, record)
        return
    if os.path.isdir(output_dir) and _entries(output_dir):
        if os.path.exists(path):  # Another share claimed it meanwhile.
            return _claim(output_dir, record)
        raise ValueError(
            f"{output_dir!r} is not empty and holds no {SETTINGS_FILE}: "
            "it is not a comparison folder; nothing was overwritten. "
            "Choose an empty or new --output-dir.")
    os.makedirs(output_dir, exist_ok=True)
    if not _create_record(path, record):  # Another share was first.
        _claim(output_dir, record)


def _entries(folder):
    """The names in `folder` but the temporary files of a write under
    way (another share's `compare.json`)."""
    return [name for name in os.listdir(folder)
            if not name.startswith(".tmp-")]


def _create_record(path, record):
    """Writes the JSON `record` at `path` unless a file is there (shares
    starting at once: one writes it, the others compare with it); returns
    whether it wrote."""
    temporary = os.path.join(os.path.dirname(path),
                             f".tmp-{os.getpid()}-new-{os.path.basename(path)}")
    write_json_atomically(temporary, record)
    try:
        os.link(temporary, path)  # Atomic, and fails when `path` exists.
        return True
    except FileExistsError:
        return False
    except OSError:  # A file system without hard links: a plain write.
        write_json_atomically(path, record)
        return True
    finally:
        os.remove(temporary)


def _check_same_comparison(output_dir, previous, current):
    """Refuses to resume the comparison `previous` (its `compare.json`)
    with the `current` settings unless they match (but for the routers)."""
    if "data" not in previous:
        raise ValueError(
            f"{os.path.join(output_dir, SETTINGS_FILE)!r} was written by an "
            "earlier keras_caps that did not record the comparison's data "
            "(data folder and files), so its models cannot be checked "
            "against this data: the folder is neither resumed nor "
            "extended, and nothing was overwritten. Use another "
            "--output-dir.")
    data = previous["data"]
    if isinstance(data, dict) and "source" not in data and "data_dir" in data:
        raise ValueError(
            f"{os.path.join(output_dir, SETTINGS_FILE)!r} records its data "
            "by folder path (a development version of keras_caps), not by "
            "the files' content as keras_caps now does, so its models "
            "cannot be checked against this data: the folder is neither "
            "resumed nor extended, and nothing was overwritten. Use another "
            "--output-dir.")
    differing = _differences(
        {**previous, "routers": None, "data": None},
        {**current, "routers": None, "data": None})
    differing += _data_changes(previous["data"], current["data"])
    if differing:
        raise ValueError(
            f"{output_dir!r} holds a comparison made with other settings "
            f"or data (differing: {'; '.join(differing)}); nothing was "
            "overwritten. Use another --output-dir, or the same settings "
            "and data (any routers) to resume or extend it.")


def _data_changes(previous, current):
    """What differs between two data records, a phrase each."""
    if previous == current:
        return []
    if all(isinstance(data, dict) and "source" not in data
           for data in (previous, current)):  # Built-in datasets.
        return [f"data: {change}"
                for change in data_differences(previous, current)]
    return _differences({"data": previous}, {"data": current})


def _differences(previous, current, prefix=""):
    """`"<key>: <previous> before, <current> now"` for each differing
    entry of two records, nested keys dotted."""
    found = []
    for key in sorted(set(previous) | set(current)):
        old, new = previous.get(key, _ABSENT), current.get(key, _ABSENT)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            found += _differences(old, new, f"{prefix}{key}.")
        else:
            found.append(f"{prefix}{key}: {_short(old)} before, "
                         f"{_short(new)} now")
    return found


_ABSENT = object()


def _short(value, limit=70):
    text = "absent" if value is _ABSENT else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_record(path, advice):
    """The JSON record `path`; an unreadable one is a `ValueError` naming
    the file, followed by `advice`."""
    try:
        return read_json_record(path)
    except UnreadableRecordError as error:
        raise ValueError(f"{error} {advice}") from None
