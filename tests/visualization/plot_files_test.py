"""`keras-caps plot <kind>` writes each figure as a PNG file."""

import os

import matplotlib.image
import pytest

from keras_caps import cli
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.visualization import tiny_models


@pytest.fixture(scope="module")
def saved_models_and_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plot")
    data_dir = write_idx_dataset(str(folder / "mnist"),
                                 synthetic_digits(20), synthetic_digits(12))
    capsnet_path = str(folder / "run" / "model.keras")
    os.makedirs(os.path.dirname(capsnet_path))
    tiny_models.tiny_capsnet((28, 28, 1), num_classes=10).save(capsnet_path)
    with open(folder / "run" / "history.csv", "w") as file:
        file.write("epoch,accuracy,loss,val_accuracy,val_loss\n"
                   "0,0.5,1.2,0.6,1.0\n1,0.7,0.8,0.72,0.75\n")
    vector_routing_path = str(folder / "vector_routing.keras")
    tiny_models.tiny_vector_routing_model(
        (28, 28, 1), num_classes=10).save(vector_routing_path)
    return capsnet_path, vector_routing_path, data_dir


def test_plot_routing_of_attention_routing(saved_models_and_data, tmp_path):
    _, _, data_dir = saved_models_and_data
    model_path = str(tmp_path / "attention_routing.keras")
    tiny_models.tiny_capsnet((28, 28, 1), num_classes=10,
                             routing="attention_routing").save(model_path)
    output = str(tmp_path / "routing.png")
    assert cli.main(["plot", "routing", "--model-path", model_path,
                     "--data-dir", data_dir, "--output", output,
                     "--dpi", "40"]) == 0
    pixels = matplotlib.image.imread(output)
    assert pixels[..., :3].std() > 0.05


@pytest.mark.parametrize("kind, extra", [
    ("reconstructions", ["--num-images", "4"]),
    ("perturbation", ["--index", "3"]),
    ("routing", ["--layer", "digit_caps"]),
    ("credit", ["--num-images", "3"]),
    ("curves", []),
])
def test_plot_writes_a_png(kind, extra, saved_models_and_data, tmp_path,
                           capsys):
    capsnet_path, vector_routing_path, data_dir = saved_models_and_data
    model_path = vector_routing_path if kind == "credit" else capsnet_path
    output = str(tmp_path / "figures" / f"{kind}.png")
    code = cli.main(["plot", kind, "--model-path", model_path,
                     "--data-dir", data_dir, "--output", output,
                     "--dpi", "40", *extra])
    assert code == 0
    assert f"Wrote {output}" in capsys.readouterr().out
    pixels = matplotlib.image.imread(output)
    assert min(pixels.shape[:2]) >= 40
    assert pixels[..., :3].std() > 0.05


def test_curves_from_an_explicit_log(saved_models_and_data, tmp_path,
                                     monkeypatch):
    capsnet_path, _, _ = saved_models_and_data
    log = os.path.join(os.path.dirname(capsnet_path), "history.csv")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plot", "curves", "--log", log, "--dpi", "40"]) == 0
    assert os.path.exists(tmp_path / "curves.png")  # the default output


def test_plot_errors(saved_models_and_data, tmp_path, capsys):
    capsnet_path, _, data_dir = saved_models_and_data
    assert cli.main(["plot", "routing", "--model-path", "missing.keras",
                     "--output", str(tmp_path / "x.png")]) == 2
    assert "No model at `--model-path`" in capsys.readouterr().err
    assert cli.main(["plot", "perturbation", "--model-path", capsnet_path,
                     "--data-dir", data_dir, "--index", "12",
                     "--output", str(tmp_path / "x.png")]) == 2
    assert "has only 12 images" in capsys.readouterr().err
    assert cli.main(["plot", "curves", "--output",
                     str(tmp_path / "x.png")]) == 2
    assert "needs a training log" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["plot", "histogram"])
    assert "invalid choice: 'histogram'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "x.png")


def test_missing_matplotlib_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert cli.main(["plot", "curves", "--log", "history.csv", "--output",
                     str(tmp_path / "x.png")]) == 2
    assert 'pip install "keras-caps[plot]"' in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["reconstructions", "perturbation"])
def test_a_model_of_other_classes_is_refused(kind, saved_models_and_data,
                                             tmp_path, capsys):
    # A 4-class model against MNIST's 10 labels drew "0 (true 7)".
    _, _, data_dir = saved_models_and_data
    model_path = str(tmp_path / "four.keras")
    tiny_models.tiny_capsnet((28, 28, 1), num_classes=4).save(model_path)
    output = tmp_path / "x.png"
    assert cli.main(["plot", kind, "--model-path", model_path,
                     "--data-dir", data_dir, "--output", str(output)]) == 2
    assert ("The dataset has 10 classes but the model outputs 4"
            in capsys.readouterr().err)
    assert not output.exists()
