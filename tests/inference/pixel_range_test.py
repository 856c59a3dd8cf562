import numpy as np
import pytest

from keras_caps.inference import check_pixel_range


def test_check_pixel_range():
    pixels = np.random.default_rng(0).uniform(0, 255, (2, 4, 4, 1))
    assert check_pixel_range(pixels) is pixels
    check_pixel_range(np.zeros((2, 4, 4, 1)))  # a black batch passes
    check_pixel_range(np.array([[-0.5, 0.5]]))  # not [0, 1]: passes
    with pytest.raises(ValueError, match=r"`scans` look scaled to \[0, 1\]"
                       ".*from 0 to 1"):
        check_pixel_range(np.round(pixels / 255.0), "scans")
    for bad in (np.nan, np.inf, -np.inf):
        broken = pixels.copy()
        broken[1, 2, 3, 0] = bad
        with pytest.raises(ValueError, match="NaN or infinite values.*"
                           "Received: 1 non-finite values among 32"):
            check_pixel_range(broken)
