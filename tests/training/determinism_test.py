"""`keras-caps train --deterministic`: same seed, bitwise-same weights.

Two runs of the same command in separate processes (run side by side) on
tiny data must save bitwise-identical models. With the seed alone, weights
initialisation, the holdout, shuffling and augmentation are already
reproducible (all seeded); what op determinism adds is the order of
floating-point reductions inside kernels that may otherwise pick
non-deterministic algorithms (on GPUs: cuDNN convolution backprop and
atomics in segment/scatter sums and bias gradients), so without the flag GPU
runs drift apart after the first steps by round-off that training amplifies.
"""

import os
import subprocess
import sys

import keras
import numpy as np

from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset


def test_two_deterministic_runs_save_bitwise_identical_weights(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(120, seed=0),
                                 synthetic_digits(20, seed=1))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "keras_caps.cli", "train", "--dataset",
             "mnist", "--data-dir", data_dir, "--output-dir",
             str(tmp_path / f"run{index}"), "--epochs", "2", "--batch-size",
             "16", "--seed", "7", "--deterministic"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        for index in range(2)]
    try:
        errors = [process.communicate(timeout=300)[1]
                  for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, error in zip(processes, errors):
        assert process.returncode == 0, error[-3000:]
    first, second = (keras.saving.load_model(
        str(tmp_path / f"run{index}" / "model.keras")) for index in range(2))
    assert len(first.weights) == len(second.weights) > 0
    for a, b in zip(first.weights, second.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b),
                                      err_msg=a.path)
