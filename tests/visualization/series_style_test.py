"""`series_style`: the lines of a plot stay distinguishable past the ten
colours (a comparison of 13 models drew two lines alike before)."""

import pytest

from keras_caps.visualization._figures import series_style


@pytest.mark.single_backend
def test_forty_lines_have_forty_styles():
    styles = [tuple(sorted(series_style(i).items())) for i in range(40)]
    assert len(set(styles)) == 40
    assert series_style(40) == series_style(0)  # Then they repeat.
    assert series_style(3)["color"] == series_style(13)["color"]
    assert series_style(3)["linestyle"] != series_style(13)["linestyle"]
