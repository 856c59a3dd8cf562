"""A real, tiny filesystem (tmpfs) for full-disk tests.

Mounting needs root (and a container that allows it); `tiny_disk` skips
the calling test otherwise.
"""

import contextlib
import os
import subprocess

import pytest


@contextlib.contextmanager
def tiny_disk(folder, size):
    """Mounts a tmpfs of `size` (e.g. `"64k"`) at the new `folder`."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    os.makedirs(folder)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def fill(folder, leave):
    """Fills the filesystem of `folder` but about `leave` bytes."""
    stat = os.statvfs(folder)
    size = max(stat.f_bavail * stat.f_frsize - leave, 0)
    with open(os.path.join(folder, "filler"), "wb") as file:
        with contextlib.suppress(OSError):  # Full already.
            file.write(b"\0" * size)
