"""The peers' own code for the side-by-side benchmarks, and thread pinning.

A benchmark that prints a speed-up runs the peer's published code in the
same run, on the same host, with the same thread count. The peer's code is
never copied into this repository: clone it into a scratch folder outside
it and pass that folder as `--peer-dir` (each repository in its own
subfolder, named like the repository):

    mkdir -p ~/peers && cd ~/peers
    git clone https://github.com/glassroom/heinsen_routing
    git clone https://github.com/yaohungt/Capsules-Inverted-Attention-Routing

The peers are PyTorch code (a CPU wheel is enough).
"""

import os
import sys

PEERS = {
    "heinsen_routing": (
        "https://github.com/glassroom/heinsen_routing",
        "heinsen_routing/heinsen_routing.py"),
    "Capsules-Inverted-Attention-Routing": (
        "https://github.com/yaohungt/Capsules-Inverted-Attention-Routing",
        "src/capsule_model.py"),
}


def peer_folder(peer_dir, name):
    """The clone of peer `name` under `peer_dir`, or `None` if missing."""
    if not peer_dir:
        return None
    folder = os.path.join(os.path.abspath(peer_dir), name)
    marker = PEERS[name][1]
    return folder if os.path.isfile(os.path.join(folder, marker)) else None


def missing_peer_message(peer_dir, name):
    """How to get peer `name`, for a benchmark that cannot find it."""
    url = PEERS[name][0]
    where = peer_dir or "PEER_DIR"
    return (f"The peer's code ({url}) is not in --peer-dir={peer_dir!r}. "
            f"Clone it outside this repository and pass its parent folder:\n"
            f"    git clone {url} {os.path.join(where, name)}\n"
            f"    --peer-dir {where}\n"
            "or pass --no_peer to time ours alone (no ratios are printed).")


def import_peer(peer_dir, name):
    """Puts peer `name`'s clone first on `sys.path`."""
    folder = peer_folder(peer_dir, name)
    if folder is None:
        raise SystemExit(missing_peer_message(peer_dir, name))
    sys.path.insert(0, folder)
    return folder


def pin_tensorflow_threads(threads):
    """TensorFlow's intra-op threads (call before any TensorFlow op)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)


def pin_torch_threads(threads):
    """PyTorch's intra-op threads, as `pin_tensorflow_threads`."""
    import torch

    torch.set_num_threads(threads)
