"""Models not built by keras_caps are refused by every `--model-path`
command with one line naming the file (issue #27, defect 11)."""

import os

import keras
import pytest

from keras_caps import applications
from keras_caps import cli
from keras_caps.inference.model_file_loading import check_application_model
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

_SHAPE = (16, 16, 1)


def _sequential_with_logits():
    """The issue's model: a plain classifier with a layer named `logits`."""
    return keras.Sequential([keras.Input((28, 28, 1), name="image"),
                             keras.layers.Flatten(),
                             keras.layers.Dense(10, name="logits")])


def _logits_not_the_output():
    images = keras.Input((28, 28, 1), name="image")
    logits = keras.layers.Dense(10, name="logits")(
        keras.layers.Flatten()(images))
    return keras.Model(images, keras.layers.Softmax(name="scores")(logits))


def _no_image_input():
    pixels = keras.Input((28, 28, 1), name="pixels")
    logits = keras.layers.Dense(10, name="logits")(
        keras.layers.Flatten()(pixels))
    return keras.Model(pixels, logits)


FOREIGN = {
    "sequential_with_logits": (_sequential_with_logits,
                               "it is a Sequential model"),
    "logits_not_the_output": (_logits_not_the_output,
                              "'logits' layer is not an output"),
    "no_image_input": (_no_image_input, "no input named 'image'"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    data_dir = write_idx_dataset(str(folder / "mnist"), synthetic_digits(8),
                                 synthetic_digits(4))
    paths = {}
    for name, (build, _) in FOREIGN.items():
        paths[name] = str(folder / f"{name}.keras")
        build().save(paths[name])
    return folder, data_dir, paths


@pytest.mark.parametrize("name", sorted(FOREIGN))
@pytest.mark.parametrize("command", [
    ["evaluate"], ["export"], ["plot", "routing"], ["plot", "credit"],
    ["plot", "reconstructions"], ["plot", "perturbation"]])
def test_every_model_path_command_refuses_foreign_models(
        files, name, command, capsys):
    folder, data_dir, paths = files
    argv = [*command, "--model-path", paths[name], "--data-dir", data_dir]
    target = folder / f"out-{name}-{'-'.join(command)}"
    if command == ["export"]:
        argv = [*command, "--model-path", paths[name], "--export-dir",
                str(target)]
    elif command[0] == "plot":
        argv += ["--output", f"{target}.png"]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"keras-caps {command[0]}: error: ")
    assert "is not a model built by keras_caps: " in line
    assert FOREIGN[name][1] in line
    assert repr(paths[name]) in line
    assert not os.path.exists(target)
    assert not os.path.exists(f"{target}.png")


BUILDERS = {
    "efficient_capsnet": lambda: applications.EfficientCapsNet(
        "mnist", input_shape=_SHAPE, compile=False),
    "capsnet": lambda: applications.CapsNet(
        "mnist", input_shape=(20, 20, 1), compile=False),
    "capsule_classifier": lambda: applications.CapsuleClassifier(
        "mnist", router="vector", input_shape=_SHAPE,
        reconstruction=False, compile=False),
    "cnn_baseline": lambda: applications.CNNBaseline(
        "mnist", input_shape=_SHAPE, compile=False),
    "vector_routing_capsnet": lambda: applications.VectorRoutingCapsNet(
        "mnist", input_shape=_SHAPE, compile=False),
    "vector_routing_head": lambda: applications.VectorRoutingHead(
        keras.Model(*_conv_backbone()), 5, num_hidden_capsules=4,
        compile=False),
}


def _conv_backbone():
    pixels = keras.Input((6, 6, 3), name="pixels")
    return pixels, keras.layers.Conv2D(8, 3, strides=2)(pixels)


def _check_with_a_rewired_copy(model):
    """`model` passes; the same layers with its scores feeding another
    output (a look-alike the layer names alone let through) do not."""
    check_application_model(model, "model")
    score = next(layer for layer in model.layers
                 if layer.name in ("length", "logits", "probabilities"))
    rewired = keras.Model(model.inputs, keras.layers.Activation(
        "linear", name="scores")(score.output))
    with pytest.raises(ValueError, match=f"'{score.name}' layer is not an "
                       "output"):
        check_application_model(rewired, "model")


# The check reads the model's graph, the same under every backend; building
# these models takes minutes under JAX.
@pytest.mark.single_backend
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_application_models_pass_rewired_copies_do_not(name):
    _check_with_a_rewired_copy(BUILDERS[name]())
