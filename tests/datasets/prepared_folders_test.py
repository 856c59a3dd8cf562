"""Half-prepared TFDS folders fail with one clear error (issue #27,
defect 6): a real, tiny `cifar10` is prepared by TFDS into a temporary data
directory, then damaged as an interrupted download, preparation or copy
leaves it."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from tensorflow_datasets.image_classification import cifar

from keras_caps import datasets

WORKTREE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VERSION_DIR = os.path.join("cifar10", "3.0.2")
TEST_SHARD = "cifar10-test.tfrecord-00000-of-00001"
TRAIN_SHARD = "cifar10-train.tfrecord-00000-of-00001"


class _TinyCifar10(cifar.Cifar10, skip_registration=True):
    """The real CIFAR-10 builder, with 12 + 6 random examples instead of
    the download."""

    name = "cifar10"

    def _split_generators(self, dl_manager):
        del dl_manager
        return {"train": self._examples(12, 0), "test": self._examples(6, 1)}

    def _examples(self, count, seed):
        rng = np.random.default_rng(seed)
        for index in range(count):
            yield index, {"id": f"{seed}_{index}", "label": index % 10,
                          "image": rng.integers(0, 256, (32, 32, 3),
                                                dtype=np.uint8)}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("tfds"))
    _TinyCifar10(data_dir=data_dir).download_and_prepare()
    # The sane copy loads: 6 test examples, 12 training ones.
    assert sum(len(labels) for _, labels in datasets.load(
        "cifar10", "test", batch_size=3, data_dir=data_dir,
        reconstruction=False, download=False)) == 6
    return data_dir


def _damaged(prepared, tmp_path, damage):
    data_dir = str(tmp_path / "tfds")
    shutil.copytree(prepared, data_dir)
    damage(os.path.join(data_dir, VERSION_DIR))
    return data_dir


def _empty_version_folder(folder):
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))


def _truncate(name, size):
    def damage(folder):
        path = os.path.join(folder, name)
        with open(path, "rb") as file:
            data = file.read()
        with open(path, "wb") as file:
            file.write(data[:size])
    return damage


def _remove(name):
    return lambda folder: os.remove(os.path.join(folder, name))


def _corrupt_records(name):
    """Same size, a few bytes zeroed in the middle: only reading tells."""
    def damage(folder):
        path = os.path.join(folder, name)
        with open(path, "r+b") as file:
            file.seek(os.path.getsize(path) // 2)
            file.write(b"\0" * 16)
    return damage


CASES = {
    "empty_version_folder": (_empty_version_folder, "test",
                             "it has no dataset_info.json"),
    "truncated_dataset_info": (_truncate("dataset_info.json", 300), "test",
                               r"dataset_info.json' cannot be read"),
    "truncated_test_shard": (_truncate(TEST_SHARD, 10000), "test",
                             r"'test' shard files hold 10000 bytes where "
                             r"dataset_info.json records \d+: truncated"),
    "missing_test_shard": (_remove(TEST_SHARD), "test",
                           f"1 of the 1 'test' shard files are missing, "
                           f"e.g. '{TEST_SHARD}'"),
    "missing_train_shard": (_remove(TRAIN_SHARD), "train",
                            "'train' shard files are missing"),
    "corrupt_train_records": (_corrupt_records(TRAIN_SHARD), "train",
                              "reading its 'train' examples failed"),
}


@pytest.mark.parametrize("download", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_half_prepared_folder_is_one_clear_error(prepared, tmp_path, case,
                                                 download):
    damage, split, problem = CASES[case]
    data_dir = _damaged(prepared, tmp_path, damage)
    folder = os.path.join(data_dir, VERSION_DIR)
    with pytest.raises(ValueError) as error:
        batches = datasets.load("cifar10", split, batch_size=4,
                                data_dir=data_dir, download=download)
        for _ in batches:  # Reading errors are lazy in tf.data.
            pass
    message = str(error.value)
    assert f"The TFDS dataset 'cifar10' in {folder!r} is incomplete or " \
           "damaged" in message
    assert re.search(problem, message), message
    assert "Delete that folder" in message
    assert "--data-dir" in message
    assert ("--no-download" in message) is not download
    assert os.path.isdir(folder)  # Nothing of the user's is deleted.


@pytest.mark.single_backend
def test_cli_reports_a_half_prepared_folder_in_one_line(prepared, tmp_path):
    from tests.visualization import tiny_models

    data_dir = _damaged(prepared, tmp_path, _empty_version_folder)
    model_path = str(tmp_path / "model.keras")
    tiny_models.tiny_capsnet((32, 32, 3), num_classes=10).save(model_path)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=WORKTREE)
    result = subprocess.run(
        [sys.executable, "-m", "keras_caps.cli", "plot", "routing",
         "--model-path", model_path, "--dataset", "cifar10", "--data-dir",
         data_dir, "--output", str(tmp_path / "routing.png")],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines()
               if line.startswith("keras-caps plot: error:")]
    assert "is incomplete or damaged" in line
    assert "it has no dataset_info.json" in line
    assert not os.path.exists(tmp_path / "routing.png")


def test_config_and_version_names_check_their_own_folder(tmp_path):
    """`name/config[:version]` (issue #27 review): the check looks in the
    config's folder, and a name it cannot resolve is left to TFDS."""
    from keras_caps.datasets import prepared_folders

    data_dir = str(tmp_path)
    assert prepared_folders.prepared_folder(
        "imagenette/160px", data_dir) == os.path.join(
            data_dir, "imagenette", "160px", "1.0.0")
    assert prepared_folders.prepared_folder(
        "imagenette/320px:0.9.0", data_dir) == os.path.join(
            data_dir, "imagenette", "320px", "0.9.0")
    # Not prepared: nothing to check, tfds.load downloads it or says so.
    prepared_folders.check_prepared_folder("imagenette/160px", "train",
                                           data_dir, False)
    folder = os.path.join(data_dir, "imagenette", "160px", "1.0.0")
    os.makedirs(folder)
    with pytest.raises(ValueError, match="it has no dataset_info.json") as e:
        prepared_folders.check_prepared_folder("imagenette/160px", "train",
                                               data_dir, False)
    assert repr(folder) in str(e.value)


def test_read_error_without_a_message_is_still_one_clear_error(tmp_path):
    import tensorflow as tf

    from keras_caps.datasets import prepared_folders

    with pytest.raises(ValueError, match=r"failed \(DataLossError\)"):
        with prepared_folders.read_errors_named("cifar10", "train",
                                                str(tmp_path), False):
            raise tf.errors.DataLossError(None, None, "")
