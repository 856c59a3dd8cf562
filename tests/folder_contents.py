"""What a folder holds, byte for byte: for tests that check that a
command changed nothing."""

import os


def folder_contents(folder):
    """`{relative path: bytes}` of every file under `folder`."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                found[os.path.relpath(path, folder)] = file.read()
    return found
