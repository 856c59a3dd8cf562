"""The controls as `compare` choices: decoders, defaults, refusals."""

import contextlib
import io
import json
import os

import keras
import pytest

from keras_caps import cli
from keras_caps.compare import ComparisonSettings
from keras_caps.compare import compared_models
from keras_caps.compare import comparison
from keras_caps.testing import TestCase
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset
from tests.compare.comparisons import run_comparison

# Whether each model trains with a decoder, written out by hand: the
# routers follow the comparison's `reconstruction`, the CNNs never have
# one, the ladder's step 3 always.
_DECODERS = {
    True: {"dynamic": True, "uniform": True, "cnn": False,
           "cnn_positions": False, "cnn_vectors": False,
           "cnn_vectors_decoder": True, "sabour_cnn": False},
    False: {"dynamic": False, "uniform": False, "cnn": False,
            "cnn_positions": False, "cnn_vectors": False,
            "sabour_cnn": False},
}


def _settings(reconstruction):
    return ComparisonSettings(dataset="mnist", epochs=1, steps_per_epoch=2,
                              batch_size=16, validation="holdout",
                              reconstruction=reconstruction)


@pytest.mark.single_backend
class CompareControlsTest(TestCase):
    def test_each_model_has_its_decoder(self):
        for reconstruction, expected in _DECODERS.items():
            for name, decoder in expected.items():
                settings = _settings(reconstruction).training_settings(
                    name, 0)
                self.assertEqual(settings.reconstruction, decoder,
                                 (name, reconstruction))
                self.assertEqual(settings.resolve().reconstruction,
                                 decoder)
        self.assertEqual(
            _settings(True).training_settings("cnn_vectors_decoder", 0).model,
            "cnn_vectors_decoder")

    def test_default_models(self):
        routers = [name for name in compared_models.comparable_models()
                   if name.startswith(("self_attention", "dynamic"))]
        for reconstruction in (True, False):
            names = compared_models.default_models(reconstruction)
            self.assertNotIn("sabour_cnn", names)
            self.assertEqual("cnn_vectors_decoder" in names, reconstruction)
            for name in ("uniform", "cnn", "cnn_positions", "cnn_vectors",
                         *routers):
                self.assertIn(name, names)

    def test_a_control_that_does_not_exist_is_refused(self):
        output_dir = os.path.join(self.get_temp_dir(), "unused")
        for kwargs, message in (
                (dict(routers=["dynamic", "sabour_cnn"],
                      dataset="smallnorb"),
                 r"`routers`: 'sabour_cnn' has no preset for 'smallnorb'; "
                 r"it exists for \['mnist', 'mnist_canvas'\]"),
                (dict(routers=["sabour_cnn"], dataset="fashion_mnist"),
                 "'sabour_cnn' has no preset for 'fashion_mnist'"),
                (dict(routers=["dynamic", "cnn_vectors_decoder"],
                      reconstruction=False),
                 r"'cnn_vectors_decoder' is the CNN ladder's step that adds "
                 r"the decoder.*--no-reconstruction.*reconstruction=False")):
            with self.assertRaisesRegex(ValueError, message):
                run_comparison(output_dir=output_dir, **kwargs)
        self.assertFalse(os.path.exists(output_dir))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = cli.main(["compare", "--output-dir", output_dir,
                             "--dataset", "smallnorb", "--routers",
                             "cnn,sabour_cnn"])
        self.assertEqual(code, 2)
        self.assertRegex(stderr.getvalue(), "keras-caps compare: error: "
                         ".*'sabour_cnn' has no preset for 'smallnorb'")
        self.assertFalse(os.path.exists(output_dir))

    def test_a_stem_a_model_lacks_is_refused_before_writing(self):
        # The ladder's steps take the GroupNorm stem; Sabour's CNN has no
        # such stem: refused up front, whichever model comes first.
        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(20, seed=0), synthetic_digits(10, seed=1))
        output_dir = os.path.join(self.get_temp_dir(), "group")
        with self.assertRaisesRegex(
                ValueError, "'sabour_cnn' has no "
                "`stem_normalization` option.*stem_normalization='group'"):
            run_comparison(
                ["cnn_positions", "cnn_vectors", "sabour_cnn"], "mnist",
                output_dir=output_dir, seeds=[0], data_dir=data_dir,
                stem_normalization="group")
        self.assertFalse(os.path.exists(output_dir))

    def test_ladder_step_two_trains_without_decoder(self):
        # `cnn_vectors` and `cnn_vectors_decoder` are one `train` model;
        # in a comparison with reconstruction, step 2 still has none.
        data_dir = write_idx_dataset(
            os.path.join(self.get_temp_dir(), "mnist"),
            synthetic_digits(40, seed=0), synthetic_digits(10, seed=1))
        output_dir = os.path.join(self.get_temp_dir(), "compare")
        results = run_comparison(
            ["cnn_vectors"], "mnist", output_dir=output_dir, seeds=[0],
            epochs=1, steps_per_epoch=1, batch_size=8, data_dir=data_dir,
            corruptions={}, isolation="session")
        folder = comparison.run_dir(output_dir, "cnn_vectors", 0)
        with open(os.path.join(folder, "run.json")) as file:
            self.assertFalse(json.load(file)["settings"]["reconstruction"])
        model = keras.saving.load_model(os.path.join(folder, "model.keras"))
        self.assertEqual(model.name, "cnn_vectors")
        self.assertEqual(model.output_shape, (None, 10))
        self.assertTrue(results["settings"]["reconstruction"])
