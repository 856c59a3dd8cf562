"""docs/results/ is what scripts/results_pages.py makes from results/."""

import importlib.util
import pathlib
import shutil

from keras_caps.testing import TestCase

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "results_pages.py"
RESULTS = ROOT / "results"
PAGES = ROOT / "docs" / "results"


def _load_script():
    spec = importlib.util.spec_from_file_location("results_pages", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


results_pages = _load_script()


def stale_message(stale):
    """The failure message for the stale pages `stale` (file names)."""
    return ("not what scripts/results_pages.py makes from results/: "
            + ", ".join(f"docs/results/{name}" for name in stale)
            + "; run `python scripts/results_pages.py` and commit the pages")


class DocsResultsTest(TestCase):
    def test_committed_pages_are_the_generated_ones(self):
        generated = pathlib.Path(self.get_temp_dir())
        results_pages.write(RESULTS, generated)
        names = sorted(path.name for path in generated.glob("*.md"))
        committed = sorted(path.name for path in PAGES.glob("*.md"))
        self.assertEqual(committed, names, stale_message(
            sorted(set(names) ^ set(committed))))
        stale = [name for name in names if (PAGES / name).read_bytes()
                 != (generated / name).read_bytes()]
        self.assertEqual(stale, [], stale_message(stale))
        self.assertEqual(results_pages.stale_pages(RESULTS, PAGES), [])

    def test_the_same_records_give_the_same_bytes(self):
        self.assertEqual(results_pages.render(RESULTS),
                         results_pages.render(RESULTS))

    def _copy_of_records(self):
        """A results folder holding the records of two folders."""
        results = pathlib.Path(self.get_temp_dir()) / "results"
        results.mkdir()
        shutil.copy(RESULTS / "README.md", results)
        shutil.copytree(RESULTS / "matrix_capsnet_mnist",
                        results / "matrix_capsnet_mnist")
        (results / "compare_mnist").mkdir()
        for name in ("results.md", "results.json", "compare.json"):
            shutil.copy(RESULTS / "compare_mnist" / name,
                        results / "compare_mnist")
        return results

    def _change(self, path, old, new):
        text = path.read_text(encoding="utf-8")
        self.assertIn(old, text)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    def test_a_changed_number_makes_its_page_stale(self):
        results = self._copy_of_records()
        pages = results.parent / "pages"
        results_pages.write(results, pages)
        self.assertEqual(results_pages.stale_pages(results, pages), [])

        # A run's test accuracy (95.22 % on the page).
        self._change(results / "matrix_capsnet_mnist" / "it2_seed0"
                     / "metrics.json", "0.9521999955177307",
                     "0.9421999955177307")
        stale = results_pages.stale_pages(results, pages)
        self.assertEqual(stale, ["matrix_capsnet_mnist.md"])
        self.assertIn("docs/results/matrix_capsnet_mnist.md",
                      stale_message(stale))
        self.assertIn("94.22", results_pages.render(results)[
            "matrix_capsnet_mnist.md"])

        # One cell of a comparison's table.
        self._change(results / "compare_mnist" / "results.md",
                     "97.65 [97.44, 97.85]", "97.66 [97.44, 97.85]")
        self.assertEqual(results_pages.stale_pages(results, pages),
                         ["compare_mnist.md", "matrix_capsnet_mnist.md"])

    def test_a_page_without_records_is_stale(self):
        results = self._copy_of_records()
        pages = results.parent / "pages"
        results_pages.write(results, pages)
        shutil.rmtree(results / "matrix_capsnet_mnist")
        self.assertEqual(results_pages.stale_pages(results, pages),
                         ["index.md", "matrix_capsnet_mnist.md"])
