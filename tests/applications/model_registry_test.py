"""`keras_caps.applications.MODELS`: one name per model for every command,
and the names written before 0.2.0 read in records and refused in
commands with the new name."""

import json
import pathlib
import re

import pytest

from keras_caps import cli
from keras_caps.applications import MODELS
from keras_caps.applications import CapsuleClassifier
from keras_caps.applications import RegisteredModel
from keras_caps.applications import check_model_name
from keras_caps.applications import current_model_name
from keras_caps.applications.capsule_classifier import ROUTERS
from keras_caps.runs.run_folder import RunFolder
from keras_caps.training import TrainingSettings
from keras_caps.training.run_progress import current_settings

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "results"

# Written out by hand: the registry's names by kind.
_PAPERS = ["efficient_capsnet", "capsnet", "vector_routing_capsnet",
           "inverted_attention_capsnet", "matrix_capsnet"]
_CONTROLS = ["cnn", "cnn_positions", "cnn_vectors", "cnn_vectors_decoder",
             "sabour_cnn"]
# The names of 0.1.x: `keras-caps train --model` -> today's name.
_OLD_NAMES = {
    "capsule_classifier_self_attention": "self_attention",
    "capsule_classifier_dynamic": "dynamic",
    "capsule_classifier_uniform": "uniform",
    "capsule_classifier_em": "em",
    "cnn_baseline": "cnn",
    "sabour_baseline_cnn": "sabour_cnn",
}


def _names(kind):
    return [name for name, entry in MODELS.items() if entry.kind == kind]


def test_one_name_per_model_by_kind():
    assert _names("paper") == _PAPERS
    assert _names("router") == list(ROUTERS)
    assert _names("control") == _CONTROLS
    assert len(MODELS) == len(_PAPERS) + len(ROUTERS) + len(_CONTROLS)
    for router in ROUTERS:
        assert MODELS[router].family.builder.func is CapsuleClassifier
    assert [name for name, entry in MODELS.items()
            if not entry.compared_by_default] == ["sabour_cnn"]
    with pytest.raises(ValueError, match="Unknown `kind`.*'toy'"):
        RegisteredModel(MODELS["cnn"].family, "toy", "a toy")


def test_old_names_read_and_are_refused_with_the_new_name():
    for old, new in _OLD_NAMES.items():
        assert current_model_name(old) == new
        with pytest.raises(ValueError, match=(
                f"Unknown `model`: '{old}' is named '{new}' since 0.2.0")):
            check_model_name(old)
    # Steps 2 and 3 of the CNN ladder were one name, told apart by the
    # decoder.
    assert current_model_name("cnn_vectors", reconstruction=False) == (
        "cnn_vectors")
    assert current_model_name("cnn_vectors", reconstruction=True) == (
        "cnn_vectors_decoder")
    assert current_model_name("capsule_classifier_unknown") == (
        "capsule_classifier_unknown")
    for name in ("resnet", None, ["cnn"]):
        with pytest.raises(ValueError, match="Unknown `model`. Expected"):
            check_model_name(name)


def test_every_committed_run_record_reads_under_a_registered_name():
    records = sorted(RESULTS.glob("**/run.json"))
    assert len(records) >= 90
    read = {}
    for path in records:
        settings = json.loads(path.read_text())["settings"]
        fields = {key: value for key, value in settings.items()
                  if key != "data"}
        model = TrainingSettings.from_record(fields).model
        assert model in MODELS, path
        read[settings["model"]] = model
    assert read["capsule_classifier_dynamic"] == "dynamic"
    assert read["cnn_baseline"] == "cnn"


def test_a_run_folder_of_an_old_name_resumes_under_the_new(tmp_path):
    settings = TrainingSettings("cnn", "mnist", epochs=1).resolve()
    old = {**settings.to_record(), "model": "cnn_baseline"}
    (tmp_path / "run.json").write_text(json.dumps(
        {"settings": old, "progress": {"trained": False}}))
    folder = RunFolder(str(tmp_path), settings,
                       upgrade_settings=current_settings)
    assert folder.open() == {"trained": False}
    folder.update(trained=True)  # Recorded under the new name.
    rewritten = json.loads((tmp_path / "run.json").read_text())
    assert rewritten == {"settings": settings.to_record(),
                         "progress": {"trained": True}}
    # Without the upgrade the same folder is another run's.
    (tmp_path / "run.json").write_text(json.dumps(
        {"settings": old, "progress": {}}))
    with pytest.raises(ValueError, match="other settings"):
        RunFolder(str(tmp_path / "."), settings).open()


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "--model", "cnn_baseline"],
     "invalid choice: 'cnn_baseline'; it is named 'cnn' since 0.2.0"),
    (["train", "--model", "capsule_classifier_dynamic"],
     "it is named 'dynamic' since 0.2.0"),
    (["train", "--model", "resnet"], "invalid choice: 'resnet'"),
])
def test_train_refuses_unknown_and_old_names(argv, message, capsys):
    with pytest.raises(SystemExit) as raised:
        cli.build_parser().parse_args(argv)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(("routers", "message"), [
    ("cnn_baseline,dynamic", r"Unknown routers \['cnn_baseline'\] "
     r"\('cnn_baseline' is named 'cnn' since 0.2.0\)"),
    ("efficient_capsnet", "'efficient_capsnet' is a paper's model with a "
     "stem of its own.*keras-caps train --model efficient_capsnet"),
])
def test_compare_refuses_old_names_and_the_papers_models(
        routers, message, tmp_path, capsys):
    output_dir = tmp_path / "compare"
    code = cli.main(["compare", "--routers", routers, "--output-dir",
                     str(output_dir), "--epochs", "1"])
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not output_dir.exists()
