import os
import subprocess
import sys
import textwrap

import keras
import pytest

from keras_caps.applications import EfficientCapsNet
from keras_caps.inference import load_model_file

WORKTREE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class Doubling(keras.layers.Layer):  # Deliberately not registered.
    def call(self, inputs):
        return inputs * 2.0


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.keras"
    EfficientCapsNet("mnist", reconstruction=False).save(path)
    return str(path)


def test_loads_an_application_model(model_path):
    model = load_model_file(model_path)
    assert model.get_layer("length").output.shape == (None, 10)


def test_missing_folder_truncated_and_garbage_files(model_path, tmp_path):
    with pytest.raises(ValueError, match="No model at `--model-path`"):
        load_model_file(str(tmp_path / "missing.keras"), "--model-path")
    with pytest.raises(ValueError, match="not a folder"):
        load_model_file(str(tmp_path), "--model-path")
    with open(model_path, "rb") as file:
        data = file.read()
    cases = {"truncated.keras": data[:-100],
             "garbage.keras": os.urandom(4000),
             "empty.keras": b""}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ValueError, match="`model_path` is not a readable "
                           r"\.keras file: not a zip archive") as error:
            load_model_file(str(path), "model_path")
        assert str(path) in str(error.value)
        assert f"({len(content)} bytes)" in str(error.value)


def test_a_zip_that_is_not_a_keras_file(tmp_path):
    import zipfile

    path = tmp_path / "notes.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ValueError, match="holds no config.json"):
        load_model_file(str(path))


def test_unregistered_class_and_plain_keras_model(tmp_path):
    inputs = keras.Input((4,))
    model = keras.Model(inputs, Doubling()(keras.layers.Dense(3)(inputs)))
    model.save(tmp_path / "custom.keras")
    with pytest.raises(ValueError, match="(?s)no imported package "
                       "registered.*Doubling.*import the package"):
        load_model_file(str(tmp_path / "custom.keras"))
    plain = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(3, name="scores")])
    plain.save(tmp_path / "plain.keras")
    with pytest.raises(ValueError, match=r"not a model built by keras_caps"
                       r".*\['scores'\]"):
        load_model_file(str(tmp_path / "plain.keras"))
    loaded = load_model_file(str(tmp_path / "plain.keras"),
                             require_application=False)
    assert [layer.name for layer in loaded.layers] == ["scores"]


def test_keras_needs_import_keras_caps_first(model_path):
    """The README's rule, in a fresh process: Keras alone cannot find the
    layers (and its error names the keras_caps module); after
    `import keras_caps` the file loads with no `custom_objects`."""
    script = textwrap.dedent("""
        import sys
        import keras
        assert "keras_caps" not in sys.modules
        try:
            keras.saving.load_model(sys.argv[1])
        except TypeError as error:
            print("ERROR", "keras_caps.layers" in str(error))
        import keras_caps  # noqa: F401
        model = keras.saving.load_model(sys.argv[1])
        print("LOADED", model.get_layer("length").output.shape)
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=WORKTREE)
    result = subprocess.run([sys.executable, "-c", script, model_path],
                            capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-2:] == [
        "ERROR True", "LOADED (None, 10)"]
