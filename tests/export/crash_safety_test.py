"""A process killed while saving or exporting leaves no half-written files.

A child process saves `model.keras` (through
`keras_caps.training.atomic_files.save_model_atomically`) and exports the
SavedModel (`export_inference_model`) over and over into the same folder;
the test kills it with SIGKILL at several moments (spread over the writes)
and then checks that `model.keras` and `export/` are each either absent or
complete: the `.keras` file loads, the SavedModel loads and serves. The
staging files left by a killed writer are hidden (`.tmp-*`, `.export-*`)
and are never what a reader opens.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import tensorflow as tf

_WRITER = textwrap.dedent("""
    import os
    import sys

    from keras_caps.applications import EfficientCapsNet
    from keras_caps.export import export_inference_model
    from keras_caps.training.atomic_files import save_model_atomically

    folder = sys.argv[1]
    model = EfficientCapsNet("mnist")
    round = 0
    while True:
        save_model_atomically(model, os.path.join(folder, "model.keras"))
        export_inference_model(model, os.path.join(folder, "export"))
        round += 1
        with open(os.path.join(folder, "rounds"), "w") as file:
            file.write(str(round))
""")


def _check_complete_or_absent(folder):
    model_path = os.path.join(folder, "model.keras")
    if os.path.exists(model_path):
        model = keras.saving.load_model(model_path)
        assert len(model.weights) > 0
    export = os.path.join(folder, "export")
    if os.path.exists(export):
        served = tf.saved_model.load(export)
        scores = served.serve(tf.zeros((1, 28, 28, 1)))
        assert np.isfinite(np.asarray(scores)).all()


def test_killed_writer_leaves_complete_files_or_none(tmp_path):
    folder = str(tmp_path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    rounds_file = tmp_path / "rounds"
    # Each writer is killed once its first round is complete, at staggered
    # moments of the rounds after it (a round takes about a second).
    for delay in (0.0, 0.7, 1.9):
        process = subprocess.Popen(
            [sys.executable, "-c", _WRITER, folder], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 120
            while not rounds_file.exists() and time.time() < deadline:
                if process.poll() is not None:
                    raise AssertionError("the writer died on its own")
                time.sleep(0.05)
            time.sleep(delay)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        _check_complete_or_absent(folder)
    assert int(rounds_file.read_text() or 0) >= 1
    visible = sorted(name for name in os.listdir(folder)
                     if not name.startswith("."))
    assert visible in (["export", "model.keras", "rounds"],
                       ["model.keras", "rounds"]), visible
