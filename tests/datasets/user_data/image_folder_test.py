import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from keras_caps.cli.shared_arguments import image_size
from keras_caps.datasets.user_data import image_folder
from keras_caps.datasets.user_data import image_memory
from keras_caps.testing import image_folders

pytestmark = pytest.mark.single_backend


def test_reads_classes_and_pixels_in_sorted_order(tmp_path):
    image_folders.write_image_folder(tmp_path, {"dog": 2, "cat": 3},
                                     formats=("png",), colors=("L",))
    arrays = image_folder.read_image_folder(str(tmp_path))
    images, labels = arrays.train
    assert arrays.class_names == ("cat", "dog")
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 1])
    assert images.dtype == np.uint8 and images.shape == (5, 16, 16, 1)
    expected = [image_folders.class_image(0, seed=i) for i in range(3)] + [
        image_folders.class_image(1, seed=i) for i in range(2)]
    np.testing.assert_array_equal(images[..., 0], np.stack(expected))
    assert arrays.source["color_mode"] == "grayscale"
    assert arrays.source["fingerprint"]["files"] == 5


def test_color_mode_is_rgb_when_any_file_is_colour(tmp_path):
    image_folders.write_image_folder(tmp_path, {"a": 4, "b": 4})
    arrays = image_folder.read_image_folder(tmp_path)
    assert arrays.train[0].shape == (8, 16, 16, 3)
    gray = image_folder.read_image_folder(tmp_path, color_mode="grayscale")
    assert gray.train[0].shape == (8, 16, 16, 1)


def test_different_sizes_need_image_size(tmp_path):
    image_folders.write_image_folder(tmp_path, {"a": 2, "b": 2})
    Image.new("L", (20, 12)).save(tmp_path / "b" / "wide.png")
    with pytest.raises(ValueError, match="different sizes.*image_size") as (
            raised):
        image_folder.read_image_folder(tmp_path)
    # The flag as it parses: 28, or HEIGHT,WIDTH.
    assert "--image-size 28, or HEIGHT,WIDTH such as 32,24" in str(
        raised.value)
    assert image_size("32,24") == (32, 24)
    arrays = image_folder.read_image_folder(tmp_path, image_size=(8, 10))
    assert arrays.train[0].shape == (5, 8, 10, 1)


def test_unreadable_files_are_skipped_with_a_warning(tmp_path, caplog):
    image_folders.write_image_folder(tmp_path, {"a": 3, "b": 2})
    image_folders.write_truncated_image(tmp_path / "a" / "cut.png")
    image_folders.write_non_image(tmp_path / "b" / "notes.jpg")
    with caplog.at_level(logging.WARNING):
        arrays = image_folder.read_image_folder(tmp_path)
    assert len(arrays.train[1]) == 5
    assert arrays.source["skipped_files"] == 2
    assert "Skipped 2 image files" in caplog.text
    assert "cut.png" in caplog.text and "notes.jpg" in caplog.text


def test_a_class_of_only_broken_files_is_an_error(tmp_path):
    image_folders.write_image_folder(tmp_path, {"a": 3})
    image_folders.write_truncated_image(tmp_path / "b" / "cut.png")
    with pytest.raises(ValueError, match=r"\['b'\].*can be decoded"):
        image_folder.read_image_folder(tmp_path)


@pytest.mark.parametrize("counts, message", [
    ({}, "0 class subfolders"),
    ({"only": 3}, "at least 2"),
    ({"a": 2, "empty": 0}, r"\['empty'\].*hold no image files"),
])
def test_bad_folders(tmp_path, counts, message):
    image_folders.write_image_folder(tmp_path, counts)
    with pytest.raises(ValueError, match=f"`dataset`.*{message}"):
        image_folder.read_image_folder(tmp_path)


def test_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="`test_dir`.*is not a folder"):
        image_folder.read_image_folder(tmp_path / "nope",
                                       argument="test_dir")


def test_other_classes_than_expected(tmp_path):
    image_folders.write_image_folder(tmp_path, {"a": 1, "c": 1})
    with pytest.raises(ValueError, match=r"Missing there: \['b'\]; not in "
                       r"the training data: \['c'\]"):
        image_folder.read_image_folder(tmp_path, class_names=("a", "b"),
                                       argument="test_dir")


def test_refuses_more_images_than_memory_allows(tmp_path, monkeypatch):
    image_folders.write_image_folder(tmp_path, {"a": 2, "b": 2})
    # 4 grayscale images of 16x16 = 1024 bytes; the limit is 1/8 of the
    # available memory (half of it, over 4 copies): 1000 bytes.
    monkeypatch.setattr(image_memory, "available_memory_bytes",
                        lambda: 8 * 1000)
    with pytest.raises(ValueError, match="do not fit in memory.*image_size"):
        image_folder.read_image_folder(tmp_path)
    arrays = image_folder.read_image_folder(tmp_path, image_size=(8, 8))
    assert arrays.train[0].shape == (4, 8, 8, 1)


def test_fingerprint_follows_the_content(tmp_path):
    paths = image_folders.write_image_folder(tmp_path, {"a": 2, "b": 2},
                                             formats=("png",))
    before = image_folder.read_image_folder(tmp_path).source["fingerprint"]
    Image.fromarray(np.zeros((16, 16), "uint8")).save(paths["a"][0])
    after = image_folder.read_image_folder(tmp_path).source["fingerprint"]
    assert before["files"] == after["files"] == 4
    assert before["sha256"] != after["sha256"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_among_the_images_is_skipped(tmp_path):
    # Opening a FIFO waits for a writer forever: the reader hung.
    image_folders.write_image_folder(tmp_path, {"a": 2, "b": 2})
    os.mkfifo(tmp_path / "a" / "pipe.png")
    script = ("import sys; from keras_caps.datasets.user_data import "
              "image_folder; arrays = image_folder.read_image_folder("
              "sys.argv[1]); print(len(arrays.train[1]))")
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                            capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "4"
    assert "not regular files" in result.stderr and "pipe.png" in (
        result.stderr)
