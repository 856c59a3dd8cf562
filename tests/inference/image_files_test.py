"""`read_image` against pixels written with Pillow and hand-made arrays."""

import numpy as np
import pytest
from PIL import Image

from keras_caps.inference.image_files import UnreadableImageError
from keras_caps.inference.image_files import check_image_size
from keras_caps.inference.image_files import list_image_files
from keras_caps.inference.image_files import read_image
from keras_caps.testing.image_folders import class_image
from keras_caps.testing.image_folders import write_image_folder
from keras_caps.testing.image_folders import write_non_image
from keras_caps.testing.image_folders import write_truncated_image

pytestmark = pytest.mark.single_backend


def _noise(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape).astype("uint8")


def test_png_pixels_read_back_exactly(tmp_path):
    gray, rgb = _noise((5, 7)), _noise((5, 7, 3), seed=1)
    Image.fromarray(gray, "L").save(tmp_path / "g.png")
    Image.fromarray(rgb, "RGB").save(tmp_path / "c.PNG")
    np.testing.assert_array_equal(read_image(tmp_path / "g.png"),
                                  gray[:, :, None])
    np.testing.assert_array_equal(
        read_image(tmp_path / "c.PNG", color_mode="rgb"), rgb)
    assert read_image(tmp_path / "g.png").dtype == np.uint8


def test_rgb_to_grayscale_is_itu_601_luma(tmp_path):
    pixels = np.zeros((1, 2, 3), "uint8")
    pixels[0, 0] = (200, 100, 50)
    pixels[0, 1] = (0, 0, 255)
    Image.fromarray(pixels, "RGB").save(tmp_path / "c.png")
    # 200*.299 + 100*.587 + 50*.114 = 124.2; 255*.114 = 29.07.
    np.testing.assert_array_equal(read_image(tmp_path / "c.png")[0, :, 0],
                                  [124, 29])


def test_grayscale_as_rgb_repeats_the_channel(tmp_path):
    gray = _noise((4, 4))
    Image.fromarray(gray, "L").save(tmp_path / "g.bmp")
    np.testing.assert_array_equal(
        read_image(tmp_path / "g.bmp", color_mode="rgb"),
        np.repeat(gray[:, :, None], 3, axis=2))


def test_resize_is_pil_bilinear(tmp_path):
    rgb = _noise((20, 30, 3))
    Image.fromarray(rgb, "RGB").save(tmp_path / "c.png")
    expected = np.asarray(Image.fromarray(rgb, "RGB").resize(
        (11, 8), Image.Resampling.BILINEAR))
    got = read_image(tmp_path / "c.png", image_size=(8, 11),
                     color_mode="rgb")
    np.testing.assert_array_equal(got, expected)
    up = read_image(tmp_path / "c.png", image_size=(40, 60))
    assert up.shape == (40, 60, 1)


def test_alpha_and_palette_transparency_are_dropped(tmp_path):
    rgba = _noise((3, 4, 4))
    rgba[0, 0, 3] = 0
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    np.testing.assert_array_equal(
        read_image(tmp_path / "a.png", color_mode="rgb"), rgba[:, :, :3])
    palette = Image.fromarray(rgba[:, :, :3], "RGB").quantize(4)
    palette.info["transparency"] = 0
    palette.save(tmp_path / "p.gif")
    expected = np.asarray(palette.convert("RGBA"))[:, :, :3]
    np.testing.assert_array_equal(
        read_image(tmp_path / "p.gif", color_mode="rgb"), expected)
    gray_alpha = Image.fromarray(rgba[:, :, :2].copy(), "LA")
    gray_alpha.save(tmp_path / "la.png")
    np.testing.assert_array_equal(read_image(tmp_path / "la.png")[:, :, 0],
                                  rgba[:, :, 0])


def test_sixteen_bit_png_is_scaled_to_eight_bits(tmp_path):
    values = np.array([[0, 257, 65535, 32896]], "uint16")
    Image.fromarray(values).save(tmp_path / "deep.png")
    np.testing.assert_array_equal(read_image(tmp_path / "deep.png")[0, :, 0],
                                  [0, 1, 255, 128])


def test_gif_reads_its_first_frame(tmp_path):
    first, second = _noise((6, 6)), _noise((6, 6), seed=2)
    frames = [Image.fromarray(a, "L") for a in (first, second)]
    frames[0].save(tmp_path / "anim.gif", save_all=True,
                   append_images=frames[1:])
    with Image.open(tmp_path / "anim.gif") as image:
        expected = np.asarray(image.convert("L"))
    np.testing.assert_array_equal(read_image(tmp_path / "anim.gif")[:, :, 0],
                                  expected)


def test_unreadable_files_name_the_file(tmp_path):
    truncated = write_truncated_image(tmp_path / "cut.png")
    with pytest.raises(UnreadableImageError, match="cut.png") as caught:
        read_image(truncated)
    assert isinstance(caught.value, ValueError)
    assert caught.value.path == truncated
    text = write_non_image(tmp_path / "notes.jpg")
    with pytest.raises(UnreadableImageError, match="notes.jpg.*not an image"):
        read_image(text)
    with pytest.raises(FileNotFoundError, match="missing.png"):
        read_image(tmp_path / "missing.png")


@pytest.mark.parametrize("image_size, error", [
    ((0, 4), ValueError), ((4,), ValueError), ((2.5, 4), ValueError),
    ("28", TypeError), (28, TypeError)])
def test_bad_image_size(image_size, error):
    with pytest.raises(error, match="image_size.*received"):
        check_image_size(image_size)


def test_bad_color_mode(tmp_path):
    Image.fromarray(_noise((2, 2)), "L").save(tmp_path / "g.png")
    with pytest.raises(ValueError, match="color_mode.*'rgba'"):
        read_image(tmp_path / "g.png", color_mode="rgba")


def test_written_folder_reads_back_its_class_images(tmp_path):
    paths = write_image_folder(tmp_path, {"b": 2, "a": 3, "empty": 0},
                               size=(16, 16), formats=("png", "jpg"),
                               colors=("L", "RGB"))
    assert sorted(paths) == ["a", "b", "empty"] and paths["empty"] == []
    assert [p.rsplit("/", 1)[1] for p in paths["a"]] == [
        "0.png", "1.jpg", "2.png"]
    with Image.open(paths["a"][2]) as image:
        assert image.mode == "RGB"
    for class_index, name in enumerate(["a", "b"]):
        for i, path in enumerate(paths[name]):
            image = read_image(path)[:, :, 0].astype(int)
            expected = class_image(class_index, (16, 16), seed=i)
            tolerance = 0 if path.endswith(".png") else 40
            assert np.abs(image - expected).max() <= tolerance, path
    assert list_image_files(tmp_path / "a") == paths["a"]
    assert list_image_files(tmp_path) == []
    assert len(list_image_files(tmp_path, recursive=True)) == 5
