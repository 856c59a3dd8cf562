"""MirroredStrategy over 2 logical CPUs trains like one device.

The same global batch of 16 is split into two replicas of 8; Keras scales
each replica's loss by 1 / replicas and the gradients are all-reduced by sum,
so one step must be the one-device step up to float32 summation order.

Tolerance: losses to 1e-5 relative, weights to 1e-5 absolute after 3 Adam
steps (learning rate 1e-3 or less; measured differences are about 1e-7,
float32 round-off of a sum taken in a different order).

Batch normalisation is the one place where the two differ by design: in
training mode Keras normalises each replica with its own half-batch
statistics (there is no cross-replica sync in `BatchNormalization`), so an
EfficientCapsNet step on 2 replicas is not the one-device step. The
comparison is therefore made
- exactly on CapsNet, which has no batch normalisation, and
- on EfficientCapsNet with its batch-norm layers frozen (`trainable=False`,
  which in Keras 3 also means inference-mode normalisation with the moving
  statistics), which compares everything else: convolutions, primary
  capsules, self-attention routing, margin and reconstruction losses,
  gradient all-reduce and the optimizer.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

_SCRIPT = """
import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras
import numpy as np

from keras_caps import datasets
from keras_caps.applications import MODELS

data_dir, output = sys.argv[1], sys.argv[2]
one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
result, arrays = {}, {}
for name, freeze_batch_norm in (("capsnet", False),
                                ("efficient_capsnet", True)):
    runs = []
    initial = None
    for strategy in (one_device, mirrored):
        keras.utils.set_random_seed(1)
        train = datasets.load("mnist", "train", batch_size=16,
                              data_dir=data_dir, augment=False, seed=1)
        with strategy.scope():
            model = MODELS[name].family.builder("mnist")
        if freeze_batch_norm:
            for layer in model.layers:
                if isinstance(layer, keras.layers.BatchNormalization):
                    layer.trainable = False
        if initial is None:
            initial = model.get_weights()
            for index, weight in enumerate(initial):
                arrays[f"{name}/initial/{index}"] = weight
        model.set_weights(initial)
        history = model.fit(train, epochs=3, steps_per_epoch=1, verbose=0,
                            shuffle=False)
        for index, weight in enumerate(model.get_weights()):
            arrays[f"{name}/{len(runs)}/{index}"] = weight
        runs.append((history.history["loss"], len(model.weights),
                     strategy.num_replicas_in_sync))
    result[name] = runs
np.savez(output + ".npz", **arrays)
with open(output, "w") as file:
    json.dump(result, file)
"""


def test_mirrored_on_two_cpus_matches_one_device(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(64, seed=0),
                                 synthetic_digits(16, seed=1))
    output = tmp_path / "result.json"
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), data_dir,
         str(output)],
        check=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                 CUDA_VISIBLE_DEVICES=""))
    result = json.loads(output.read_text())
    arrays = np.load(str(output) + ".npz")
    assert sorted(result) == ["capsnet", "efficient_capsnet"]
    for name, (single, distributed) in result.items():
        (loss_1, count, replicas_1) = single
        (loss_2, _, replicas_2) = distributed
        assert (replicas_1, replicas_2) == (1, 2), name
        assert len(loss_1) == 3 and np.all(np.isfinite(loss_1)), name
        np.testing.assert_allclose(loss_2, loss_1, rtol=1e-5, err_msg=name)
        largest_gap, largest_move = 0.0, 0.0
        for index in range(count):
            final = arrays[f"{name}/0/{index}"]
            largest_move = max(largest_move, float(np.max(np.abs(
                final - arrays[f"{name}/initial/{index}"]))))
            largest_gap = max(largest_gap, float(np.max(np.abs(
                final - arrays[f"{name}/1/{index}"]))))
            np.testing.assert_allclose(
                arrays[f"{name}/1/{index}"], arrays[f"{name}/0/{index}"],
                rtol=0, atol=1e-5, err_msg=f"{name} weight {index}")
        print(f"{name}: weights moved up to {largest_move:.2e}, one device "
              f"vs mirrored differ by at most {largest_gap:.2e}")
        assert largest_move > 1e-3, name  # Training did change them.
