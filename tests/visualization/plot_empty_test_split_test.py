"""`keras-caps plot` on a test split without images: one clear line
(issue #27, defect 11; it was a `StopIteration` traceback)."""

import os

import pytest

from keras_caps import cli
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.visualization import tiny_models


@pytest.mark.parametrize("kind", ["routing", "reconstructions"])
def test_plot_on_an_empty_test_split(kind, tmp_path, capsys):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(8), synthetic_digits(0))
    model_path = str(tmp_path / "model.keras")
    tiny_models.tiny_capsnet((28, 28, 1), num_classes=10).save(model_path)
    output = str(tmp_path / "figure.png")
    assert cli.main(["plot", kind, "--model-path", model_path,
                     "--data-dir", data_dir, "--output", output]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("keras-caps plot: error: The 'mnist' test split "
                           "is empty")
    assert repr(data_dir) in line
    assert not os.path.exists(output)
