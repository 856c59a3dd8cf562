"""Checks of a prepared TFDS dataset folder before TFDS reads it.

TFDS takes a dataset's version folder (`<data_dir>/<name>/<version>/`) for
prepared as soon as it exists. A half-prepared one (an interrupted copy or
download, a full disk) then fails inside TFDS or `tf.data` with errors
that name neither the folder nor the remedy: `KeyError: splits is empty`
for an empty folder, a `ParseError` for a truncated `dataset_info.json`,
and, lazily, while training, a `DataLossError` or `NotFoundError` for a
truncated or missing shard. `check_prepared_folder` reads the folder's
`dataset_info.json` and compares the split's shard files with it (their
names, and for TFRecord files their total size), without reading any
example, and raises one `ValueError` that names the folder, what is wrong
and what to do.
"""

import contextlib
import json
import os
import re

import tensorflow as tf
import tensorflow_datasets as tfds

_INFO_FILE = "dataset_info.json"
_DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
# Each TFRecord record adds a length, its CRC and the data's CRC to the
# serialized example.
_TFRECORD_OVERHEAD = 16


def prepared_folder(name, data_dir):
    """The version folder TFDS reads `name` from, or None if unknown.

    `<data_dir>/<name>/[<config>/]<version>`, with the TFDS default data
    directory (`$TFDS_DATA_DIR` when TFDS was imported, else
    `~/tensorflow_datasets`) for `data_dir=None`. `name` may carry a
    config and a version, as `tfds.load` takes it (`"imagenette/160px"`,
    `"imagenette/160px:1.0.0"`); without them, the builder's default
    config and its current version.
    """
    base, config, version = _name_parts(name)
    try:
        builder_cls = tfds.builder_cls(base)
    except (tfds.core.registered.DatasetNotFoundError, ValueError):
        return None  # Names this check cannot resolve are tfds.load's.
    parts = [data_dir or tfds.core.constants.DATA_DIR, base]
    configs = getattr(builder_cls, "BUILDER_CONFIGS", None) or []
    if config:
        parts.append(config)
    elif configs:
        default = getattr(builder_cls, "DEFAULT_BUILDER_CONFIG_NAME", None)
        parts.append(default or configs[0].name)
    parts.append(version or str(builder_cls.VERSION))
    return os.path.join(*parts)


def _name_parts(name):
    """`(base, config, version)` of a TFDS `name[/config][:version]`."""
    base_and_config, _, version = name.partition(":")
    base, _, config = base_and_config.partition("/")
    return base, config, version


def check_prepared_folder(name, split, data_dir, download):
    """Raises a `ValueError` if the prepared folder of `name` is broken.

    Does nothing when the folder does not exist (the dataset is not
    prepared: TFDS downloads it or says so).

    Args:
        name: str. The TFDS dataset name.
        split: str. The split about to be read (`"train"`, `"test"`).
        data_dir: str or `None`. The TFDS data directory.
        download: bool. Whether TFDS may download it again (for the
            advice in the message).
    """
    folder = prepared_folder(name, data_dir)
    if folder is None or not os.path.isdir(folder):
        return
    problem = _folder_problem(folder, _name_parts(name)[0], split)
    if problem is not None:
        raise ValueError(broken_folder_message(name, split, data_dir, folder,
                                               problem, download))


def broken_folder_message(name, split, data_dir, folder, problem, download):
    """The one-line error for a damaged prepared folder."""
    again = ("and TFDS downloads and prepares it again" if download else
             "and prepare the dataset again on a machine with network "
             "access, as downloads are off (download=False, --no-download)")
    return (
        f"The TFDS dataset {name!r} in {folder!r} is incomplete or damaged "
        f"(an interrupted download, preparation or copy?): {problem}. "
        f"Delete that folder {again}; or pass the TFDS data directory of "
        "a complete copy as `data_dir=` (--data-dir). Received: "
        f"name={name!r}, split={split!r}, data_dir={data_dir!r}.")


@contextlib.contextmanager
def read_errors_named(name, split, data_dir, download):
    """Turns `tf.data` read errors of a TFDS dataset into one `ValueError`.

    For damage that `check_prepared_folder` cannot see without reading the
    examples (a shard of the right size with corrupt records), raised
    while the examples are iterated.
    """
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as error:
        folder = prepared_folder(name, data_dir) or data_dir
        lines = str(error.message).strip().splitlines()
        reason = (lines[0] if lines else type(error).__name__)[:300]
        raise ValueError(broken_folder_message(
            name, split, data_dir, folder,
            f"reading its {split!r} examples failed ({reason})",
            download)) from None


def _folder_problem(folder, name, split):
    """What is wrong with `folder` for reading `split`, or None."""
    info_path = os.path.join(folder, _INFO_FILE)
    if not os.path.isfile(info_path):
        return f"it has no {_INFO_FILE}"
    try:
        with open(info_path, encoding="utf-8") as file:
            info = json.load(file)
    except (OSError, ValueError) as error:
        return f"{info_path!r} cannot be read ({error})"
    splits = info.get("splits") if isinstance(info, dict) else None
    if not isinstance(splits, list) or not all(
            isinstance(entry, dict) for entry in splits):
        return f"{info_path!r} lists no splits"
    base = re.match(r"[\w-]*", split).group(0)
    by_name = {entry.get("name"): entry for entry in splits}
    if base not in by_name:
        return (f"{info_path!r} lists no {base!r} split (it lists "
                f"{sorted(map(str, by_name))})")
    return _shards_problem(folder, name, info.get("fileFormat") or
                           "tfrecord", by_name[base])


def _shards_problem(folder, name, file_format, entry):
    """What is wrong with the shard files of one split entry, or None."""
    try:
        lengths = [int(length) for length in entry.get("shardLengths", [])]
        expected_bytes = int(entry.get("numBytes") or 0)
    except (TypeError, ValueError):
        return f"the {entry['name']!r} split's entry in {_INFO_FILE} is bad"
    template = entry.get("filepathTemplate") or _DEFAULT_TEMPLATE
    count = len(lengths)
    paths = [os.path.join(folder, _shard_name(
        template, name, entry["name"], file_format, index, count))
        for index in range(count)]
    if any(path is None for path in paths):
        return None  # A naming scheme this check does not know.
    missing = [os.path.basename(path) for path in paths
               if not os.path.isfile(path)]
    if missing:
        return (f"{len(missing)} of the {count} {entry['name']!r} shard "
                f"files are missing, e.g. {missing[0]!r}")
    if file_format != "tfrecord" or not expected_bytes:
        return None
    # TFDS records either the serialized examples' bytes (its usual
    # writer) or the files' sizes (its Beam writer) as `numBytes`.
    expected = expected_bytes + _TFRECORD_OVERHEAD * sum(lengths)
    found = sum(os.path.getsize(path) for path in paths)
    if found < expected and found != expected_bytes:
        return (f"its {entry['name']!r} shard files hold {found} bytes where "
                f"{_INFO_FILE} records {expected}: truncated")
    return None


def _shard_name(template, name, split, file_format, index, count):
    """The file name of one shard under a TFDS file-path template."""
    fields = {"DATASET": name, "SPLIT": split, "FILEFORMAT": file_format,
              "SHARD_X_OF_Y": f"{index:05d}-of-{count:05d}",
              "SHARD_INDEX": f"{index:05d}", "NUM_SHARDS": f"{count:05d}"}
    try:
        return re.sub(r"\{(\w+)\}", lambda match: fields[match.group(1)],
                      template)
    except KeyError:
        return None
