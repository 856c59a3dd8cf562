"""`compare --shard K/N` and `--workers N`: a comparison on many machines.

A comparison of many models x seeds is embarrassingly parallel. A job
array of a scheduler (SLURM, Kubernetes jobs) runs the same `compare`
command with `--shard 1/N`, ..., `--shard N/N` on one comparison folder on
a shared file system: each share trains its models (`shard_models`, a
fixed split of the (model, seed) list), the run lock of each model's
folder keeps two workers off one model, and the table is written by the
share that finds every model finished (the last to finish), or by the
same command without `--shard` once all are.
"""

import numbers
import re

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(shard):
    """`"K/N"` or `(K, N)` -> `(K, N)` with `1 <= K <= N`; `None` stays.

    Raises:
        ValueError, TypeError: naming `shard`, what was expected and what
            was received.

    Example:

    >>> parse_shard("2/3")
    (2, 3)
    """
    if shard is None:
        return None
    if isinstance(shard, str):
        match = _SHARD.fullmatch(shard)
        if match is None:
            raise ValueError(
                "Received an invalid value for `shard`, expected K/N (the "
                "K-th of N shares, 1 <= K <= N, e.g. 2/4). Received: "
                f"shard={shard!r}")
        shard = (int(match.group(1)), int(match.group(2)))
    if (not isinstance(shard, (tuple, list)) or len(shard) != 2 or any(
            isinstance(part, bool) or not isinstance(part, numbers.Integral)
            for part in shard)):
        raise TypeError(
            "Received an invalid value for `shard`, expected 'K/N' or a "
            f"pair of integers (K, N). Received: shard={shard!r}")
    index, count = int(shard[0]), int(shard[1])
    if not 1 <= index <= count:
        raise ValueError(
            "Received an invalid value for `shard`, expected K/N with "
            f"1 <= K <= N (shares are numbered from 1). Received: "
            f"shard={index}/{count}")
    return index, count


def shard_models(models, shard):
    """The models of share `shard` (`(K, N)` or `None`: all of them).

    Share K takes the models at positions K-1, K-1+N, K-1+2N, ... of
    `models` (in the comparison's order: each router's seeds in turn), so
    the shares are disjoint, cover every model and differ in size by at
    most one.

    Example:

    >>> shard_models(["a", "b", "c", "d", "e"], (2, 2))
    ['b', 'd']
    """
    if shard is None:
        return list(models)
    index, count = shard
    return list(models)[index - 1::count]


def check_workers(workers, isolation):
    """`workers` as a positive int; more than one needs processes.

    Example:

    >>> check_workers(2, "process")
    2
    """
    if isinstance(workers, bool) or not isinstance(workers,
                                                   numbers.Integral):
        raise TypeError(
            "Received an invalid type for `workers`, expected a positive "
            f"integer. Received: workers={workers!r} of type "
            f"{type(workers).__name__}")
    if workers < 1:
        raise ValueError(
            "Received an invalid value for `workers`, expected a positive "
            f"integer (models trained at once). Received: workers={workers}")
    if workers > 1 and isolation != "process":
        raise ValueError(
            "Training several models at once needs a process per model: "
            "`workers` > 1 takes isolation='process' (the default). "
            f"Received: workers={workers}, isolation={isolation!r}")
    return int(workers)
