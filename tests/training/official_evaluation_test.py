"""`keras-caps evaluate --weights <official .h5>` on tiny IDX data.

Reference: a model whose weights are set by hand from the file's arrays
(not through the loader), its class scores on the same raw test images,
and the margin loss and accuracy computed from them in NumPy.
"""

import json

import numpy as np
import pytest

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.applications.official_layouts import LAYOUTS
from tests.applications.official_layouts import expected_efficient_capsnet
from tests.applications.official_layouts import known_weights
from tests.applications.official_layouts import write_official_file


@pytest.fixture
def mnist_weights_and_data(tmp_path):
    layout = LAYOUTS["mnist"]
    values = {name: value * 4 for name, value in
              known_weights(layout, 11).items()}
    path = str(tmp_path / "efficient_capsnet_MNIST.h5")
    write_official_file(path, layout, values)
    test = synthetic_digits(24, seed=5)
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(20), test)
    return path, values, data_dir, test


def _margin_loss(lengths, labels):
    one_hot = np.eye(10)[labels]
    loss = (one_hot * np.maximum(0.0, 0.9 - lengths) ** 2
            + 0.5 * (1 - one_hot) * np.maximum(0.0, lengths - 0.1) ** 2)
    return loss.sum(-1).mean()


def test_evaluate_official_weights(mnist_weights_and_data, tmp_path,
                                   capsys):
    path, values, data_dir, (images, labels) = mnist_weights_and_data
    output = str(tmp_path / "metrics.json")
    code = cli.main(["evaluate", "--weights", path, "--dataset", "mnist",
                     "--data-dir", data_dir, "--batch-size", "8",
                     "--output", output])
    assert code == 0, capsys.readouterr().err
    with open(output) as file:
        record = json.load(file)
    assert record["model"] == "efficient_capsnet"
    assert record["weights"] == path

    reference = EfficientCapsNet("mnist", reconstruction=False,
                                 compile=False)
    variables = {v.path: v for v in reference.weights}
    for name, value in expected_efficient_capsnet(values).items():
        variables[name].assign(value)
    lengths = reference.predict(images[..., None].astype("float32"),
                                verbose=0)
    assert np.ptp(lengths) > 0.05
    np.testing.assert_allclose(record["test"]["length_loss"],
                               _margin_loss(lengths, labels), rtol=1e-4)
    np.testing.assert_allclose(record["test"]["length_accuracy"],
                               np.mean(lengths.argmax(-1) == labels))


def test_weights_of_another_model_are_a_clear_error(mnist_weights_and_data,
                                                    capsys):
    path, _, data_dir, _ = mnist_weights_and_data
    code = cli.main(["evaluate", "--weights", path, "--model", "capsnet",
                     "--dataset", "mnist", "--data-dir", data_dir])
    assert code == 2
    error = capsys.readouterr().err
    for part in (path, "Efficient_CapsNet/conv2d", "(5, 5, 1, 32)",
                 "conv_1", "(9, 9, 1, 256)"):
        assert part in error


def test_weights_and_model_path_are_exclusive(capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--weights", "a.h5", "--model-path",
                  "b.keras"])
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--dataset", "mnist"])
    assert "one of the arguments" in capsys.readouterr().err
