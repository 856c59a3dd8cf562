"""The README's Python example runs as written."""

import os
import pathlib
import re

from keras_caps.testing import TestCase

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


class ReadmeTest(TestCase):
    def test_python_example_runs(self):
        blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
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
