"""`docs/adding-a-router.md` works as written: two steps make a router.

The guide's toy router is added to a copy of the package through exactly
its two steps (the file of step 1, the table entry of step 2 appended to
`routers.py`), and a fresh interpreter on that copy checks what the guide
promises: the router contract test and the classifier's parameter and
training test cover it unedited, and it is a saved and reloaded layer, a
`CapsuleClassifier` router, a `train` model and a `compare` choice of the
one registry, in `--help`, the docs' model table, the diagnostics and the
routing maps.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "adding-a-router.md"

CHECKS = """
import keras, numpy as np
from keras_caps import diagnostics, visualization
from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import MODELS
from keras_caps.compare.compared_models import comparable_models
from keras_caps.layers.cosine_routing import CosineRouting
from keras_caps.training import TrainingSettings
from docs._hooks.model_tables import model_table

assert MODELS["cosine"].kind == "router"
assert "cosine" in comparable_models()
assert TrainingSettings("cosine", "mnist").resolve().reconstruction is True
assert "| `cosine` | [`CosineRouting`]" in model_table("router")
model = CapsuleClassifier("mnist", router="cosine", input_shape=(16, 16, 1),
                          reconstruction=False)
router = model.get_layer("digit_caps")
assert isinstance(router, CosineRouting)
assert diagnostics.find_routers(model) == [router]
images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 1))
found = diagnostics.routing_layer_diagnostics(model, images)
assert sorted(found["digit_caps"]) == [
    "entropy", "entropy_per_head", "geometric_agreement", "sparsity",
    "sparsity_per_head", "top3_concentration"], found
maps = visualization.routing_couplings(model, images[:1])
assert maps.shape == (10, 16), maps.shape
np.testing.assert_allclose(maps.sum(axis=0), 1.0, atol=1e-5)
model.save("cosine.keras")
loaded = keras.saving.load_model("cosine.keras")
np.testing.assert_allclose(loaded.predict(images, verbose=0),
                           model.predict(images, verbose=0), atol=1e-6)
print("GUIDE OK")
"""


def _guide_blocks():
    """`{target path: code}` for each python block of the guide."""
    # Four-backtick fences: the router's docstring holds a ``` block.
    blocks = re.findall(r"````python\n# (\S+)\n(.*?)````",
                        GUIDE.read_text(), re.S)
    return dict(blocks)


def _copy_with_the_guides_router(target):
    shutil.copytree(REPO / "keras_caps", target / "keras_caps",
                    ignore=shutil.ignore_patterns("__pycache__"))
    blocks = _guide_blocks()
    router_file = "keras_caps/layers/cosine_routing.py"
    table = "keras_caps/applications/capsule_classifier/routers.py"
    assert sorted(blocks) == sorted([router_file, table])
    (target / router_file).write_text(blocks[router_file])
    with open(target / table, "a") as routers:
        routers.write("\n\n" + blocks[table])


def _run(command, cwd):
    env = {**os.environ, "PYTHONPATH": str(cwd), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True,
                          text=True, check=False, timeout=900)


@pytest.mark.single_backend
def test_the_guides_two_steps_make_a_router(tmp_path):
    _copy_with_the_guides_router(tmp_path)
    shutil.copy(REPO / "tests" / "layers" / "router_contract_test.py",
                tmp_path / "router_contract_test.py")
    # The contract's NumPy couplings (the `coupling` options), the
    # classifier's test of every router and the docs' table hook.
    for path in ("tests/__init__.py", "tests/ops/__init__.py",
                 "tests/ops/sparse_couplings_reference.py",
                 "tests/applications/__init__.py",
                 "tests/applications/stem_counts.py",
                 "tests/applications/capsule_classifier_test.py",
                 "docs/_hooks/model_tables.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    contract = _run([sys.executable, "-m", "pytest", "-q", "-p",
                     "no:cacheprovider", "-k", "CosineRouting",
                     "router_contract_test.py"], tmp_path)
    assert contract.returncode == 0, contract.stdout + contract.stderr
    # The contract's checks for CosineRouting: layout, trace, round trips,
    # low precision under float16 and bfloat16, and multiply-adds.
    assert re.search(r"\b6 passed", contract.stdout), contract.stdout
    # The classifier's tests of every router, unedited: registered as a
    # model, and its parameters (the stem, the primary capsules and the
    # router's own weights, nothing else) and two training steps.
    classifier = _run([sys.executable, "-m", "pytest", "-q", "-p",
                       "no:cacheprovider", "-k",
                       "cosine or every_router_is_a_registered_model",
                       "tests/applications/capsule_classifier_test.py"],
                      tmp_path)
    assert classifier.returncode == 0, (classifier.stdout
                                        + classifier.stderr)
    assert re.search(r"\b2 passed", classifier.stdout), classifier.stdout
    checks = _run([sys.executable, "-c", CHECKS], tmp_path)
    assert checks.returncode == 0, checks.stdout + checks.stderr
    assert "GUIDE OK" in checks.stdout
    for command in ("compare", "train"):
        usage = _run([sys.executable, "-m", "keras_caps.cli", command,
                      "--help"], tmp_path)
        assert usage.returncode == 0, usage.stderr
        # argparse wraps the long list of names, possibly inside a name.
        assert "cosine" in re.sub(r"\s+", "", usage.stdout), usage.stdout
