"""The public API: every public class is registered under the package."""

import inspect

import keras

import keras_caps
from keras_caps.testing import TestCase

PUBLIC_MODULES = (keras_caps.layers, keras_caps.losses)


class ApiTest(TestCase):
    def test_version(self):
        self.assertRegex(keras_caps.__version__, r"^\d+\.\d+\.\d+")

    def test_public_classes_are_registered(self):
        classes = [obj for module in PUBLIC_MODULES
                   for obj in vars(module).values() if inspect.isclass(obj)]
        self.assertNotEmpty(classes)
        for cls in classes:
            self.assertEqual(keras.saving.get_registered_name(cls),
                             f"keras_caps>{cls.__name__}")
            module = cls.__module__.rsplit(".", 1)[0]
            self.assertEqual(cls._keras_caps_api_path,
                             f"{module}.{cls.__name__}")

    def test_core_does_not_import_tensorflow(self):
        import pathlib

        root = pathlib.Path(keras_caps.__file__).parent
        for folder in ("ops", "layers", "losses"):
            for path in (root / folder).glob("*.py"):
                source = path.read_text()
                self.assertNotRegex(
                    source, r"(?m)^\s*(import|from) tensorflow",
                    f"{path} imports tensorflow")
