"""The README's Python example runs as written."""

import os
import pathlib
import re

import numpy as np

from keras_caps.testing import TestCase

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


class ReadmeTest(TestCase):
    def test_python_example_runs(self):
        example = README.read_text().split("\n## Example", 1)[1]
        blocks = re.findall(r"```python\n(.*?)```", example, re.S)
        self.assertNotEmpty(blocks)
        previous = os.getcwd()
        os.chdir(self.get_temp_dir())
        try:
            namespace = {}
            exec(blocks[0], namespace)  # noqa: S102
        finally:
            os.chdir(previous)
        model = namespace["model"]
        self.assertEqual(tuple(model.output.shape), (None, 10))

    def test_routing_temperature_example_runs(self):
        section = README.read_text().split(
            "## Routing temperature and annealing", 1)[1]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        namespace = {}
        exec(blocks[0], namespace)  # noqa: S102
        logged = namespace["history"].history["routing_temperature"]
        # Steps 3 and 7 (4 steps per epoch) of 10 exp(-0.01 t).
        self.assertAllClose(logged, [10 * np.exp(-0.03), 10 * np.exp(-0.07)],
                            rtol=1e-6)

    def test_serving_example_runs(self):
        from keras_caps.applications import EfficientCapsNet
        from keras_caps.export import export_inference_model

        serving = README.read_text().split("### Exporting and serving", 1)[1]
        blocks = re.findall(r"```python\n(.*?)```", serving, re.S)
        self.assertNotEmpty(blocks)
        previous = os.getcwd()
        os.chdir(self.get_temp_dir())
        try:
            export_inference_model(EfficientCapsNet("mnist"),
                                   "exported/mnist", reconstruction=True)
            namespace = {}
            exec(blocks[0], namespace)  # noqa: S102
        finally:
            os.chdir(previous)
        self.assertEqual(tuple(namespace["scores"].shape), (1, 10))
