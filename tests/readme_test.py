"""The Python examples of the README and the docs pages run as written."""

import os
import pathlib
import re

import numpy as np

from keras_caps.testing import TestCase

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def python_blocks(path, heading):
    """The ```python blocks of the section of `path` under `heading`.

    `heading` is a whole heading line, e.g. `"## Exporting and serving"`;
    the section runs to the next heading of the same or a higher level
    (its subsections included). Code fences are skipped when looking for
    headings, so a `#` comment in a block does not end the section.
    """
    level = len(heading) - len(heading.lstrip("#"))
    lines = path.read_text().split("\n")
    section, inside, fenced = [], False, False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        is_heading = not fenced and re.match(r"#{1,6} ", line)
        if inside and is_heading and len(line) - len(
                line.lstrip("#")) <= level:
            break
        if inside:
            section.append(line)
        elif is_heading and line.strip() == heading:
            inside = True
    if not inside:
        raise AssertionError(f"{path.name} has no heading {heading!r}")
    return re.findall(r"```python\n(.*?)```", "\n".join(section), re.S)


class PythonBlocksTest(TestCase):
    def test_finds_the_blocks_of_a_section_only(self):
        path = pathlib.Path(self.get_temp_dir()) / "page.md"
        path.write_text(
            "# Page\n\n## First\n\n```python\na = 1\n```\n\n"
            "### Inside\n\n```bash\n# not a heading\n```\n\n"
            "```python\nb = 2\n```\n\n## Second\n\n```python\nc = 3\n```\n")
        self.assertEqual(python_blocks(path, "## First"),
                         ["a = 1\n", "b = 2\n"])
        self.assertEqual(python_blocks(path, "## Second"), ["c = 3\n"])
        with self.assertRaisesRegex(AssertionError, "no heading"):
            python_blocks(path, "## Third")


class ReadmeTest(TestCase):
    def test_is_a_users_page_of_at_most_250_lines(self):
        # Results, measurements and lab notes belong in docs/ (issue 37).
        lines = README.read_text().count("\n")
        self.assertLessEqual(lines, 250, f"README.md has {lines} lines")

    def test_python_example_runs(self):
        blocks = python_blocks(
            README, "## Example: PrimaryCaps → FCCaps → Length on a small stem")
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
        blocks = python_blocks(DOCS / "attention-routing.md",
                               "## Routing temperature and annealing")
        self.assertNotEmpty(blocks)
        namespace = {}
        exec(blocks[0], namespace)  # noqa: S102
        logged = namespace["history"].history["routing_temperature"]
        # Steps 3 and 7 (4 steps per epoch) of 10 exp(-0.01 t).
        self.assertAllClose(logged, [10 * np.exp(-0.03), 10 * np.exp(-0.07)],
                            rtol=1e-6)

    def test_attention_routing_example_runs(self):
        blocks = python_blocks(DOCS / "attention-routing.md",
                               "## Attention routing (query–key–value)")
        self.assertNotEmpty(blocks)
        previous = os.getcwd()
        os.chdir(self.get_temp_dir())  # it writes history.csv
        try:
            namespace = {}
            exec(blocks[0], namespace)  # noqa: S102
            with open("history.csv") as log:
                header = log.readline()
        finally:
            os.chdir(previous)
        self.assertEqual(tuple(namespace["couplings"].shape), (2, 4, 32, 10))
        entropy = namespace["diagnostics"]["digit_caps"]["entropy_per_head"]
        self.assertLen(entropy, 4)
        self.assertIn("routing_digit_caps_entropy_head_0", header)

    def test_serving_example_runs(self):
        from keras_caps.applications import EfficientCapsNet
        from keras_caps.export import export_inference_model

        saved_model = python_blocks(DOCS / "serving.md",
                                    "## Serving from Python")
        onnx = python_blocks(DOCS / "serving.md", "## ONNX")
        self.assertNotEmpty(saved_model)
        self.assertNotEmpty(onnx)
        previous = os.getcwd()
        os.chdir(self.get_temp_dir())
        try:
            model = EfficientCapsNet("mnist")
            export_inference_model(model, "exported/mnist",
                                   reconstruction=True)
            namespace = {}
            exec(saved_model[0], namespace)  # noqa: S102
            self.assertEqual(tuple(namespace["scores"].shape), (1, 10))
            export_inference_model(model, "exported/mnist_onnx",
                                   format="onnx")
            namespace = {}
            exec(onnx[0], namespace)  # noqa: S102
            self.assertEqual(tuple(namespace["scores"].shape), (7, 10))
        finally:
            os.chdir(previous)
