"""The NumPy input pipeline (`ImageBatches`) against the tf.data one."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import keras_caps
from keras_caps.datasets import image_batches
from keras_caps.datasets import load
from keras_caps.datasets import numpy_pipeline
from tests.datasets import fixtures

pytestmark = pytest.mark.single_backend

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture
def data_dir(tmp_path):
    fixtures.write_idx_dataset(str(tmp_path / "mnist"), num_train=60,
                               num_test=15)
    return str(tmp_path)


def numpy_batches(data_dir, split, **kwargs):
    batches = load("mnist", split, data_dir=data_dir, input_pipeline="numpy",
                   **kwargs)
    assert isinstance(batches, image_batches.ImageBatches)
    return [batches[index] for index in range(len(batches))]


def tf_batches(data_dir, split, **kwargs):
    return list(load("mnist", split, data_dir=data_dir,
                     input_pipeline="tf_data", **kwargs).as_numpy_iterator())


def concatenate(batches):
    return keras.tree.map_structure(lambda *parts: np.concatenate(parts),
                                    *batches)


@pytest.mark.parametrize("split,validation,training", [
    ("validation", "holdout", None), ("test", "holdout", None),
    ("train", "holdout", False), ("validation", "test", None),
    ("train", "test", False)])
@pytest.mark.parametrize("reconstruction", [True, False])
def test_evaluation_batches_equal_tf_data(data_dir, split, validation,
                                          training, reconstruction):
    kwargs = {"batch_size": 4, "validation": validation, "seed": 3,
              "training": training, "reconstruction": reconstruction}
    mine = numpy_batches(data_dir, split, **kwargs)
    theirs = tf_batches(data_dir, split, **kwargs)
    assert len(mine) == len(theirs)  # the remainder is kept
    for my_batch, their_batch in zip(mine, theirs):
        keras.tree.assert_same_structure(my_batch, their_batch)
        for my_part, their_part in zip(keras.tree.flatten(my_batch),
                                       keras.tree.flatten(their_batch)):
            assert my_part.dtype == their_part.dtype == np.float32
            np.testing.assert_array_equal(my_part, their_part)


def test_training_batches_have_the_tf_structure(data_dir):
    kwargs = {"batch_size": 4, "seed": 1}
    mine = numpy_batches(data_dir, "train", **kwargs)
    theirs = tf_batches(data_dir, "train", **kwargs)
    # 60 digits minus a holdout of 6: 54, in 13 full batches.
    assert len(mine) == len(theirs) == 13
    for my_batch in mine:
        keras.tree.assert_same_structure(my_batch, theirs[0])
        for my_part, their_part in zip(keras.tree.flatten(my_batch),
                                       keras.tree.flatten(theirs[0])):
            assert my_part.shape == their_part.shape
            assert my_part.dtype == their_part.dtype
        inputs, targets = my_batch
        image = inputs["image"]
        assert image.min() >= 0.0 and image.max() <= 255.0
        np.testing.assert_array_equal(targets["length"], inputs["label"])
        np.testing.assert_allclose(targets["reconstruction"], image / 255.0)
        np.testing.assert_array_equal(inputs["label"].sum(axis=1), 1.0)


def test_an_epoch_draws_each_training_example_once(data_dir):
    examples = concatenate(tf_batches(data_dir, "train", batch_size=4,
                                      training=False, seed=2))
    epoch = concatenate(numpy_batches(data_dir, "train", batch_size=4,
                                      augment=False, seed=2))
    images = epoch[0]["image"].reshape(52, -1)
    known = {row.tobytes(): index for index, row in enumerate(
        examples[0]["image"].reshape(54, -1))}
    found = [known[row.tobytes()] for row in images]
    assert len(set(found)) == 52  # 54 minus the dropped remainder
    np.testing.assert_array_equal(epoch[0]["label"],
                                  examples[0]["label"][found])
    assert found != sorted(found)  # shuffled


def test_reshuffled_every_epoch_and_a_function_of_the_seed(data_dir):
    def first_images(seed, epochs):
        batches = load("mnist", "train", batch_size=8, data_dir=data_dir,
                       seed=seed, input_pipeline="numpy")
        for _ in range(epochs):
            batches.on_epoch_end()
        return batches[0][0]["image"]

    epoch_0 = first_images(seed=4, epochs=0)
    np.testing.assert_array_equal(epoch_0, first_images(seed=4, epochs=0))
    assert not np.array_equal(epoch_0, first_images(seed=4, epochs=1))
    assert not np.array_equal(epoch_0, first_images(seed=5, epochs=0))
    np.testing.assert_array_equal(first_images(seed=4, epochs=2),
                                  first_images(seed=4, epochs=2))


def test_workers_do_not_change_the_batches(data_dir):
    flatten = keras.Sequential([keras.Input((28, 28, 1)),
                                keras.layers.Flatten()])

    def predicted(workers):
        batches = load("mnist", "train", batch_size=4, data_dir=data_dir,
                       seed=6, reconstruction=False, input_pipeline="numpy",
                       workers=workers)
        return flatten.predict(batches, verbose=0)

    direct = load("mnist", "train", batch_size=4, data_dir=data_dir, seed=6,
                  reconstruction=False, input_pipeline="numpy")
    expected = np.concatenate([direct[index][0].reshape(4, -1)
                               for index in range(len(direct))])
    np.testing.assert_array_equal(predicted(workers=1), expected)
    np.testing.assert_array_equal(predicted(workers=3), expected)


def test_selection():
    expected = ("tf_data" if keras.backend.backend() == "tensorflow"
                else "numpy")
    assert numpy_pipeline.resolve_input_pipeline("auto", "mnist") == expected
    assert numpy_pipeline.resolve_input_pipeline(
        "auto", "fashion_mnist") == expected
    assert numpy_pipeline.resolve_input_pipeline("numpy", "mnist") == "numpy"
    assert numpy_pipeline.resolve_input_pipeline("tf_data",
                                                 "mnist") == "tf_data"
    assert numpy_pipeline.resolve_input_pipeline("auto",
                                                 "smallnorb") == "tf_data"


@pytest.mark.parametrize("kwargs,error,message", [
    ({"input_pipeline": "grain"}, ValueError,
     r"invalid value for `input_pipeline`.*Received: input_pipeline='grain'"),
    ({"input_pipeline": "tf_data", "workers": 2}, ValueError,
     r"\['workers'\] are options of the NumPy input pipeline"),
    ({"input_pipeline": "numpy", "workers": 0}, ValueError,
     r"`workers`, expected a positive integer"),
    ({"input_pipeline": "numpy", "use_multiprocessing": 1}, TypeError,
     r"`use_multiprocessing`, expected a bool"),
    ({"input_pipeline": "numpy", "shuffle_buffer_size": 10}, ValueError,
     r"shuffles the whole split.*shuffle_buffer_size=10 for 54 examples"),
    ({"input_pipeline": "numpy", "augmentation": "flip"}, ValueError,
     r"`augmentation`"),
    ({"input_pipeline": "numpy", "shift": 2}, ValueError,
     r"Unknown options for dataset 'mnist': \['shift'\]"),
])
def test_bad_arguments(data_dir, kwargs, error, message):
    with pytest.raises(error, match=message):
        load("mnist", "train", batch_size=4, data_dir=data_dir, **kwargs)


def test_numpy_pipeline_only_for_its_datasets():
    with pytest.raises(ValueError, match=r"covers the datasets \['mnist', "
                       r"'fashion_mnist', 'multi_mnist'\] only.*"
                       r"dataset='smallnorb'"):
        load("smallnorb", "train", batch_size=4, input_pipeline="numpy")


def test_a_full_shuffle_buffer_is_accepted(data_dir):
    batches = load("mnist", "train", batch_size=4, data_dir=data_dir,
                   shuffle_buffer_size=54, input_pipeline="numpy")
    assert len(batches) == 13


def test_fashion_mnist_reads_its_subfolder(tmp_path):
    written = fixtures.write_idx_dataset(str(tmp_path / "fashion_mnist"),
                                         num_train=20, num_test=7, seed=9)
    batches = load("fashion_mnist", "test", batch_size=4,
                   data_dir=str(tmp_path), reconstruction=False,
                   input_pipeline="numpy")
    images, labels = concatenate([batches[i] for i in range(len(batches))])
    np.testing.assert_array_equal(images[..., 0], written["test"][0])
    np.testing.assert_array_equal(labels.argmax(axis=1), written["test"][1])


_TENSORFLOW_FREE_SCRIPT = textwrap.dedent("""
    import sys

    # Wraps the import finders so that TensorFlow and TFDS look uninstalled:
    # `import tensorflow` fails and `find_spec` answers None (PyTorch asks).
    class HideTensorFlow:

        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tensorflow_datasets"):
                return None
            return self.finder.find_spec(name, path, target)

        def __getattr__(self, name):
            return getattr(self.finder, name)

    sys.meta_path[:] = [HideTensorFlow(finder) for finder in sys.meta_path]
    import keras
    import keras_caps

    data_dir = sys.argv[1]
    train = keras_caps.datasets.load("mnist", "train", batch_size=8,
                                     data_dir=data_dir, seed=1)
    validation = keras_caps.datasets.load("mnist", "validation",
                                          batch_size=8, data_dir=data_dir)
    image = keras.Input((28, 28, 1), name="image")
    label = keras.Input((10,), name="label")
    flat = keras.layers.Flatten()(image)
    length = keras.layers.Dense(10, activation="softmax", name="length")(
        flat)
    pixels = keras.layers.Dense(784, activation="sigmoid")(
        keras.layers.Concatenate()([flat, label]))
    reconstruction = keras.layers.Reshape((28, 28, 1),
                                          name="reconstruction")(pixels)
    model = keras.Model({"image": image, "label": label},
                        {"length": length, "reconstruction": reconstruction})
    model.compile("adam", loss={"length": "categorical_crossentropy",
                                "reconstruction": "mse"})
    history = model.fit(train, validation_data=validation, epochs=2,
                        shuffle=False, verbose=0)
    pairs = keras_caps.datasets.load("multi_mnist", "train", batch_size=4,
                                     data_dir=data_dir, pairs_per_epoch=8)
    print(type(train).__name__, len(train), len(validation),
          type(pairs).__name__, pairs[1][0]["image"].shape)
    print(len(history.history["loss"]), "val_loss" in history.history,
          train.epoch)
    try:
        keras_caps.datasets.load("smallnorb", "train", batch_size=8)
    except ValueError as error:
        print("smallnorb:", error)
    try:
        keras_caps.datasets.training_statistics("smallnorb")
    except ValueError as error:
        print("statistics:", error)
    print("tensorflow" in sys.modules, keras.backend.backend())
""")


def test_trains_on_jax_without_tensorflow(tmp_path):
    fixtures.write_idx_dataset(str(tmp_path / "mnist"), num_train=40,
                               num_test=10)
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO_ROOT}
    result = subprocess.run(
        [sys.executable, "-c", _TENSORFLOW_FREE_SCRIPT, str(tmp_path)],
        capture_output=True, text=True, env=env, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    # 40 digits: a holdout of 4, 36 to train on in 4 batches of 8.
    assert lines[0] == "ImageBatches 4 1 MultiMnistBatches (4, 36, 36, 1)"
    # Two epochs trained, each a new shuffle (JAX's trainer also ends one
    # after reading a first batch to build the model: 3).
    trained, validated, epochs = lines[1].split()
    assert (trained, validated) == ("2", "True") and int(epochs) >= 2
    assert lines[2].startswith("smallnorb: The 'smallnorb' input pipeline "
                               "needs TensorFlow")
    assert "pip install tensorflow tensorflow-datasets" in lines[2]
    assert lines[3].startswith("statistics: Computing the 'smallnorb' input "
                               "statistics needs TensorFlow and TFDS")
    assert lines[4] == "False jax"


def test_the_package_lists_the_new_modules():
    for name in ("numpy_augmentation", "image_batches", "numpy_pipeline",
                 "augmentation_parameters", "multi_mnist_batches"):
        assert name in dir(keras_caps.datasets)
