"""The public API: every public class is registered under the package."""

import inspect

import keras

import keras_caps
from keras_caps.testing import TestCase

PUBLIC_MODULES = (keras_caps.layers, keras_caps.losses, keras_caps.metrics)


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

    def test_importing_the_core_does_not_import_tensorflow(self):
        import subprocess
        import sys

        code = ("import sys, keras_caps; "
                "print('tensorflow' in sys.modules)")
        env = {"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin"}
        result = subprocess.run([sys.executable, "-c", code],
                                capture_output=True, text=True, env=env,
                                check=True)
        self.assertEqual(result.stdout.strip().splitlines()[-1], "False")

    def test_core_does_not_import_tensorflow(self):
        import pathlib

        root = pathlib.Path(keras_caps.__file__).parent
        for folder in ("ops", "layers", "losses", "metrics",
                       "applications", "inference"):
            for path in (root / folder).rglob("*.py"):
                source = path.read_text()
                self.assertNotRegex(
                    source, r"(?m)^\s*(import|from) tensorflow",
                    f"{path} imports tensorflow")
