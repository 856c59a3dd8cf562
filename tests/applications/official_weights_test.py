"""Loading the official Efficient-CapsNet / CapsNet Keras 2 HDF5 weights.

References: the real smallNORB weights of the official repository and the
official graph's outputs for 8 inputs (in `$KERAS_CAPS_DATA_DIR/official/`,
skipped when absent); for the other files, HDF5 files written in the
official layout from known weights (`official_layouts.py`), and a NumPy
forward pass of the official original-CapsNet graph.
"""

import os

import h5py
import keras
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from keras_caps.applications import CapsNet
from keras_caps.applications import EfficientCapsNet
from keras_caps.applications import load_official_weights
from tests.applications.official_layouts import LAYOUTS
from tests.applications.official_layouts import expected_capsnet
from tests.applications.official_layouts import expected_decoder
from tests.applications.official_layouts import expected_efficient_capsnet
from tests.applications.official_layouts import known_weights
from tests.applications.official_layouts import write_official_file

OFFICIAL_DIR = os.path.join(os.environ.get("KERAS_CAPS_DATA_DIR", ""),
                            "official")
SMALLNORB_WEIGHTS = os.path.join(OFFICIAL_DIR,
                                 "efficient_capsnet_SMALLNORB.h5")
SMALLNORB_REFERENCE = os.path.join(
    OFFICIAL_DIR, "efficient_capsnet_smallnorb_reference.npz")
needs_official_data = pytest.mark.skipif(
    not (os.environ.get("KERAS_CAPS_DATA_DIR")
         and os.path.exists(SMALLNORB_WEIGHTS)),
    reason="needs the official weights in $KERAS_CAPS_DATA_DIR/official")


def _model_weights(model):
    """The model's weights by path; the routing temperatures, which the
    official files do not have, must have stayed at 1."""
    weights = {v.path: keras.ops.convert_to_numpy(v) for v in model.weights}
    for path in [path for path in weights if path.endswith("/temperature")]:
        assert weights.pop(path) == 1.0, path
    return weights


def _build(kind, **kwargs):
    kwargs.setdefault("compile", False)
    if kind == "capsnet":
        return CapsNet("mnist", **kwargs)
    return EfficientCapsNet(kind, **kwargs)


@pytest.fixture(scope="module")
def official_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("official")
    files = {}
    for seed, (kind, layout) in enumerate(LAYOUTS.items()):
        values = known_weights(layout, seed)
        path = str(folder / f"{kind}.h5")
        write_official_file(path, layout, values)
        files[kind] = (path, values)
    return files


# === The real smallNORB weights against the official graph's outputs ===

@needs_official_data
def test_smallnorb_official_weights_give_the_official_outputs():
    reference = np.load(SMALLNORB_REFERENCE)
    # The official graph takes standardised images; unit statistics make
    # the model's input standardisation the identity, so it takes them too.
    model = EfficientCapsNet("smallnorb", input_statistics=((0, 0), (1, 1)),
                             compile=False, weights=SMALLNORB_WEIGHTS)
    network = keras.Model(model.get_layer("image").output,
                          [model.get_layer("digit_caps").output,
                           model.get_layer("length").output])
    poses, lengths = network.predict(reference["inputs"], verbose=0)
    np.testing.assert_allclose(poses, reference["digit_caps"], atol=1e-5)
    np.testing.assert_allclose(lengths, reference["lengths"], atol=1e-5)
    # The decoder gets the file's `Generator` weights.
    decoder = model.get_layer("decoder")
    with h5py.File(SMALLNORB_WEIGHTS, "r") as file:
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(decoder.get_layer("conv_4").kernel),
            file["Generator/conv2d_3/kernel:0"][()])
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(decoder.get_layer("dense").bias),
            file["Generator/dense/bias:0"][()])


@needs_official_data
def test_smallnorb_weights_do_not_fit_the_mnist_model():
    model = _build("mnist")
    before = _model_weights(model)
    with pytest.raises(ValueError) as error:
        load_official_weights(model, SMALLNORB_WEIGHTS)
    message = str(error.value)
    for part in (SMALLNORB_WEIGHTS, "CapsNet/conv2d_4", "conv_1",
                 "(7, 7, 2, 32)", "(5, 5, 1, 32)"):
        assert part in message
    _assert_unchanged(model, before)


# === Round trips of files written in the official layouts ===

@pytest.mark.parametrize("kind", ["mnist", "multi_mnist", "capsnet"])
def test_official_layout_round_trip(official_files, kind):
    path, values = official_files[kind]
    model = _build(kind, weights=path)
    if kind == "capsnet":
        expected = expected_capsnet(values)
    else:
        expected = expected_efficient_capsnet(values)
    expected.update(expected_decoder(values))
    loaded = _model_weights(model)
    assert sorted(loaded) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)


def test_model_without_decoder_loads_the_capsule_network(official_files):
    path, values = official_files["mnist"]
    model = _build("mnist", reconstruction=False)
    load_official_weights(model, path)
    loaded = _model_weights(model)
    for name, value in expected_efficient_capsnet(values).items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)


# === The original CapsNet against a NumPy forward pass of its official graph

def _conv_valid(images, kernel, stride):
    size = kernel.shape[0]
    windows = sliding_window_view(images, (size, size), axis=(1, 2))
    windows = windows[:, ::stride, ::stride]  # (b, h, w, c, k, k)
    return np.einsum("bhwcpq,pqcf->bhwf", windows, kernel)


def _hinton_squash(s):
    norm = np.linalg.norm(s, axis=-1, keepdims=True)
    return norm**2 / (1 + norm**2) / (norm + 1e-7) * s


def _official_capsnet_lengths(images, values, routing=3):
    """The official `original_capsnet_graph_mnist` in NumPy (float64)."""
    def file(name):
        return values[f"Original_CapsNet/{name}:0"].astype("float64")

    x = np.maximum(_conv_valid(images, file("conv2d/kernel"), 1)
                   + file("conv2d/bias"), 0.0)
    x = _conv_valid(x, file("primary_caps/kernel"), 2)  # (b, 6, 6, 256)
    x = x.reshape(-1, 6, 6, 32, 8) / 32 + file("primary_caps/biases")
    primary = _hinton_squash(x).reshape(-1, 1152, 8)  # (h, w, type) order
    votes = np.einsum("bji,jik->bjk", primary, file("digit_caps/W"))
    votes = votes.reshape(-1, 1152, 10, 16)
    logits = np.zeros(votes.shape[:-1] + (1,))
    for iteration in range(routing):
        couplings = np.exp(logits) / np.exp(logits).sum(2, keepdims=True)
        s = (votes * couplings).sum(1, keepdims=True) + file(
            "digit_caps/biases")
        v = _hinton_squash(s)
        if iteration < routing - 1:
            logits = logits + (votes * v).sum(-1, keepdims=True)
    return np.sqrt((v[:, 0] ** 2).sum(-1) + 1e-7)


def test_original_capsnet_matches_the_official_graph(official_files):
    path, values = official_files["capsnet"]
    # Bigger weights than the round-trip ones, so routing is not trivial.
    values = {name: value * 2 for name, value in values.items()}
    scaled = path.replace(".h5", "_scaled.h5")
    write_official_file(scaled, LAYOUTS["capsnet"], values)
    model = _build("capsnet", reconstruction=False, weights=scaled)
    images = np.random.default_rng(3).uniform(0, 255, (2, 28, 28, 1))
    expected = _official_capsnet_lengths(images / 255.0, values)
    lengths = model.predict(images.astype("float32"), verbose=0)
    assert np.ptp(expected) > 0.1
    np.testing.assert_allclose(lengths, expected, atol=1e-4)


# === Bad input: clear errors, the model's weights untouched ===

def _assert_unchanged(model, before):
    after = _model_weights(model)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_another_datasets_file_names_the_layer_and_both_shapes(
        official_files):
    path, _ = official_files["mnist"]
    model = _build("multi_mnist")
    before = _model_weights(model)
    with pytest.raises(ValueError) as error:
        load_official_weights(model, path)
    message = str(error.value)
    for part in (path, "Efficient_CapsNet/conv2d_4", "primary_caps",
                 "(9, 9, 1, 128)", "(5, 5, 1, 128)"):
        assert part in message
    _assert_unchanged(model, before)


def test_the_original_capsnet_file_does_not_fit_efficient_capsnet(
        official_files):
    path, _ = official_files["capsnet"]
    model = _build("mnist")
    before = _model_weights(model)
    with pytest.raises(ValueError,
                       match=r"Original_CapsNet/conv2d.*\(9, 9, 1, 256\).*"
                             r"conv_1.*\(5, 5, 1, 32\)"):
        load_official_weights(model, path)
    _assert_unchanged(model, before)


def test_a_bad_decoder_leaves_the_capsule_network_untouched(
        official_files, tmp_path):
    # The capsule network fits; only the last decoder layer does not, so
    # nothing may be assigned although most weights were read fine.
    (group, network), (generator, decoder) = LAYOUTS["mnist"]
    decoder = decoder[:2] + [("dense_2", [("kernel", (1024, 1296)),
                                          ("bias", (1296,))])]
    layout = [(group, network), (generator, decoder)]
    path = str(tmp_path / "bad_decoder.h5")
    write_official_file(path, layout, known_weights(layout, 7))
    model = _build("mnist")
    before = _model_weights(model)
    with pytest.raises(ValueError, match=r"Generator/dense_2.*\(1024, 1296\)"
                                         r".*dense_3.*\(1024, 784\)"):
        load_official_weights(model, path)
    _assert_unchanged(model, before)


def test_a_missing_decoder_group_is_a_clear_error(tmp_path):
    (group, network), _ = LAYOUTS["mnist"]
    layout = [(group, network)]
    path = str(tmp_path / "no_decoder.h5")
    write_official_file(path, layout, known_weights(layout, 1))
    model = _build("mnist")
    before = _model_weights(model)
    with pytest.raises(ValueError, match="no 'Generator' group.*"
                                         "reconstruction=False"):
        load_official_weights(model, path)
    _assert_unchanged(model, before)


def test_unreadable_files_are_clear_errors(official_files, tmp_path):
    model = _build("mnist", reconstruction=False)
    before = _model_weights(model)
    text = tmp_path / "weights.h5"
    text.write_text("not an HDF5 file")
    with pytest.raises(ValueError, match="not a complete HDF5 file"):
        load_official_weights(model, str(text))
    truncated = tmp_path / "truncated.h5"
    with open(official_files["mnist"][0], "rb") as file:
        data = file.read()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=str(truncated)):
        load_official_weights(model, str(truncated))
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as file:
        file.create_dataset("x", data=np.zeros(3))
    with pytest.raises(ValueError, match="not a Keras 2 weights file"):
        load_official_weights(model, str(other))
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        load_official_weights(model, str(tmp_path / "missing.h5"))
    _assert_unchanged(model, before)


def test_weights_with_architecture_options_are_rejected(official_files):
    path, _ = official_files["mnist"]
    with pytest.raises(ValueError, match=r"input_shape=\(32, 32, 1\)"):
        EfficientCapsNet("mnist", input_shape=(32, 32, 1), weights=path)
    with pytest.raises(ValueError, match="num_classes=4"):
        CapsNet("mnist", num_classes=4, weights=path)
    with pytest.raises(ValueError, match="input_statistics"):
        EfficientCapsNet("smallnorb", weights=path)
    with pytest.raises(TypeError, match="weights"):
        EfficientCapsNet("mnist", weights=3)
    with pytest.raises(TypeError, match="model"):
        load_official_weights("model", path)
