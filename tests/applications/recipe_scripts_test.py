"""Every recipe in `applications/*.sh` hands `keras-caps train` arguments
it accepts: run with a stand-in `keras-caps` first on `PATH` (which
records them), the script's model and dataset have a preset, and its
epochs and batch size are that preset's (so the headers' budgets are
the ones the recipe trains with)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from keras_caps.applications import MODELS
from keras_caps.cli import build_parser

_REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
_SCRIPTS = sorted((_REPOSITORY / "applications").glob("*.sh"))

# Records its arguments as JSON into $RECORDED_ARGUMENTS.
_STAND_IN = """#!{python}
import json, os, sys
with open(os.environ["RECORDED_ARGUMENTS"], "w") as file:
    json.dump(sys.argv[1:], file)
"""


def _recorded_arguments(script, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "keras-caps"
    stand_in.write_text(_STAND_IN.format(python=sys.executable))
    stand_in.chmod(0o755)
    record = tmp_path / "arguments.json"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               RECORDED_ARGUMENTS=str(record))
    subprocess.run(["bash", str(script), str(tmp_path / "data"),
                    "--seed", "7"], env=env, cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    return json.loads(record.read_text())


@pytest.mark.single_backend
def test_the_recipes_are_found():
    assert len(_SCRIPTS) >= 9, _SCRIPTS


@pytest.mark.single_backend
@pytest.mark.parametrize("script", _SCRIPTS, ids=lambda path: path.stem)
def test_a_recipe_trains_its_model_with_its_preset(script, tmp_path):
    arguments = _recorded_arguments(script, tmp_path)
    args = build_parser().parse_args(arguments)
    assert args.command == "train"
    assert args.data_dir == str(tmp_path / "data")  # Its first argument.
    assert args.seed == 7  # Extra arguments are passed on.
    assert args.model in MODELS
    preset = MODELS[args.model].family.get_preset(args.dataset)
    assert args.epochs == preset["epochs"]
    assert args.batch_size in (None, preset["batch_size"])
