"""The public API: every public class is registered under the package."""

import importlib.util
import inspect
import pathlib
import subprocess
import sys

import keras
import pytest

import keras_caps
from keras_caps.testing import TestCase

PUBLIC_MODULES = (keras_caps.layers, keras_caps.losses, keras_caps.metrics,
                  keras_caps.callbacks, keras_caps.schedules)
REPO_ROOT = pathlib.Path(keras_caps.__file__).parent.parent


def _run_python(code, backend):
    """stdout of `python -c code` in a fresh interpreter on this checkout."""
    env = {"KERAS_BACKEND": backend, "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(REPO_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", code],
                            capture_output=True, text=True, env=env,
                            check=False)
    if result.returncode:
        raise AssertionError(f"{code!r} failed:\n{result.stderr}")
    return result.stdout.strip()


class ApiTest(TestCase):
    def test_version(self):
        self.assertRegex(keras_caps.__version__, r"^\d+\.\d+\.\d+")

    def test_public_classes_are_registered(self):
        classes = [obj for module in PUBLIC_MODULES
                   for obj in vars(module).values()
                   if inspect.isclass(obj) and hasattr(obj, "get_config")]
        self.assertNotEmpty(classes)
        for cls in classes:
            self.assertEqual(keras.saving.get_registered_name(cls),
                             f"keras_caps>{cls.__name__}")
            module = cls.__module__.rsplit(".", 1)[0]
            self.assertEqual(cls._keras_caps_api_path,
                             f"{module}.{cls.__name__}")

    @pytest.mark.single_backend
    def test_importing_the_core_does_not_import_tensorflow(self):
        code = ("import sys, keras_caps; "
                "print('tensorflow' in sys.modules)")
        output = _run_python(code, backend="jax")
        self.assertEqual(output.splitlines()[-1], "False")

    @pytest.mark.single_backend
    @pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                        reason="PyTorch is not installed")
    def test_the_core_on_torch_imports_no_tensorflow(self):
        code = ("import sys, keras, keras_caps.applications; "
                "print(keras.backend.backend(), 'tensorflow' in sys.modules)")
        output = _run_python(code, backend="torch")
        self.assertEqual(output.splitlines()[-1], "torch False")

    def test_lazy_subpackages_are_listed(self):
        for name in ("datasets", "training", "export", "visualization"):
            self.assertIn(name, dir(keras_caps))
        with self.assertRaisesRegex(AttributeError, "no_such_module"):
            keras_caps.no_such_module  # noqa: B018

    @pytest.mark.single_backend
    def test_datasets_after_import_keras_caps_with_jax(self):
        # `keras_caps.datasets` is loaded on first access; `DATASETS` needs
        # no TensorFlow, so none is imported with the JAX backend.
        code = ("import sys, keras_caps; "
                "assert 'keras_caps.datasets' not in sys.modules; "
                "print(sorted(keras_caps.datasets.DATASETS)); "
                "print('tensorflow' in sys.modules)")
        output = _run_python(code, backend="jax").splitlines()
        self.assertIn("'mnist'", output[-2])
        self.assertEqual(output[-1], "False")

    @pytest.mark.single_backend
    def test_training_after_import_keras_caps_with_tensorflow(self):
        code = ("import keras_caps; "
                "print(sorted(keras_caps.applications.MODELS)); "
                "print(keras_caps.export.export_inference_model.__name__)")
        output = _run_python(code, backend="tensorflow").splitlines()
        self.assertIn("'capsnet'", output[-2])
        self.assertEqual(output[-1], "export_inference_model")

    def test_core_does_not_import_tensorflow(self):
        root = pathlib.Path(keras_caps.__file__).parent
        # Reading a TensorFlow SavedModel needs TensorFlow: this file
        # imports it inside the function that reads one, and nowhere else.
        lazy = {root / "inference" / "exported_classifier.py"}
        for folder in ("ops", "layers", "losses", "metrics", "callbacks",
                       "applications", "inference"):
            for path in (root / folder).rglob("*.py"):
                source = path.read_text()
                pattern = (r"(?m)^(import|from) tensorflow" if path in lazy
                           else r"(?m)^\s*(import|from) tensorflow")
                self.assertNotRegex(source, pattern,
                                    f"{path} imports tensorflow")
                self.assertNotIn('import_module("tensorflow")', source,
                                 f"{path} imports tensorflow")
