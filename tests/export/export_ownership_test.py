"""An export is ours only if every file under it, in every subfolder, is one
keras_caps wrote, unchanged: `export --overwrite` and `train --fresh` never
delete a user's file inside an export's subfolders (#27, defect 2)."""

import json
import os
import shutil

import pytest

from keras_caps import cli
from keras_caps.applications import EfficientCapsNet
from keras_caps.export import export_inference_model
from keras_caps.runs import check_export_target
from keras_caps.runs import is_keras_caps_export
from keras_caps.runs.export_manifest import MARKER
from keras_caps.runs.run_folder import RunFolder
from tests.folder_contents import folder_contents
from tests.tiny_disk import tiny_disk


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One export of a tiny model (and the model), shared by the tests."""
    folder = tmp_path_factory.mktemp("exported")
    model = EfficientCapsNet("mnist", reconstruction=False)
    model.save(folder / "model.keras")
    export_inference_model(model, str(folder / "export"))
    return folder


@pytest.fixture
def export_copy(exported, tmp_path):
    target = tmp_path / "export"
    shutil.copytree(exported / "export", target)
    return target


def test_the_marker_lists_every_file_with_its_hash(export_copy):
    marker = json.loads((export_copy / MARKER).read_text())
    written = {name for name in folder_contents(export_copy)
               if name != MARKER}
    assert set(marker["contents"]) == {
        name.replace(os.sep, "/") for name in written}
    assert "variables/variables.index" in marker["contents"]
    assert set(marker["folders"]) >= {"variables", "assets"}
    assert is_keras_caps_export(str(export_copy))


@pytest.mark.parametrize("added", ["assets/labels.txt",
                                   "variables/notes.txt",
                                   "variables/mine/deep.txt"])
def test_overwrite_keeps_a_user_file_in_a_subfolder(exported, export_copy,
                                                    added, capsys):
    (export_copy / added).parent.mkdir(parents=True, exist_ok=True)
    (export_copy / added).write_text("keep me")
    before = folder_contents(export_copy)
    assert not is_keras_caps_export(str(export_copy))
    assert cli.main(["export", "--model-path",
                     str(exported / "model.keras"), "--export-dir",
                     str(export_copy), "--overwrite"]) == 2
    error = capsys.readouterr().err
    assert "is not an export written by keras_caps" in error, error
    assert folder_contents(export_copy) == before


def test_a_replaced_file_makes_the_export_not_ours(export_copy):
    index = export_copy / "variables" / "variables.index"
    data = bytearray(index.read_bytes())
    data[-1] ^= 0xFF  # Same size, other bytes.
    index.write_bytes(bytes(data))
    assert not is_keras_caps_export(str(export_copy))
    index.write_bytes(bytes(data[:-1]))  # Shorter.
    assert not is_keras_caps_export(str(export_copy))
    data[-1] ^= 0xFF
    index.write_bytes(bytes(data))  # As written: ours again.
    assert is_keras_caps_export(str(export_copy))
    # An empty folder of ours may be missing (copy tools drop them), a
    # file may not, and a folder of someone else's makes it not ours.
    (export_copy / "assets").rmdir()
    assert is_keras_caps_export(str(export_copy))
    (export_copy / "mine").mkdir()
    assert not is_keras_caps_export(str(export_copy))
    (export_copy / "mine").rmdir()
    index.unlink()
    assert not is_keras_caps_export(str(export_copy))


def test_an_export_of_keras_caps_0_1_0_is_refused(exported, export_copy,
                                                  capsys):
    """keras_caps 0.1.0 listed only the top-level names in the marker: its
    exports are not replaced, with one line naming what wrote them."""
    marker = json.loads((export_copy / MARKER).read_text())
    earlier = {key: marker[key] for key in
               ("model_path", "input_range", "files")}
    earlier["keras_caps_version"] = "0.1.0"
    (export_copy / MARKER).write_text(json.dumps(earlier, indent=2))
    before = folder_contents(export_copy)
    assert not is_keras_caps_export(str(export_copy))
    with pytest.raises(ValueError, match=(
            r"^Refusing to export to .*: it holds an export written by "
            r"keras_caps 0\.1\.0, whose `keras_caps_export\.json` does not "
            r"record its files; keras_caps 0\.2\.0 does not replace it: "
            r"delete it yourself or choose a new folder\.$")):
        check_export_target(str(export_copy), overwrite=True)
    assert cli.main(["export", "--model-path",
                     str(exported / "model.keras"), "--export-dir",
                     str(export_copy), "--overwrite"]) == 2
    error = capsys.readouterr().err
    assert "written by keras_caps 0.1.0" in error, error
    assert folder_contents(export_copy) == before


def test_train_fresh_keeps_a_user_file_in_the_runs_export(
        exported, export_copy, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    shutil.move(export_copy, run / "export")
    (run / "export" / "assets" / "labels.txt").write_text("keep me")
    (run / "run.json").write_text(json.dumps(
        {"settings": {"seed": 1}, "progress": {"trained": True}}))
    before = folder_contents(run / "export")
    # The run folder alone refuses to start fresh and deletes nothing.
    with pytest.raises(ValueError, match="Nothing was deleted"):
        RunFolder(str(run), {"seed": 2}).open(fresh=True)
    assert folder_contents(run / "export") == before
    assert json.loads((run / "run.json").read_text())["settings"] == {
        "seed": 1}
    # The command refuses before deleting or training anything.
    assert cli.main(["train", "--output-dir", str(run), "--fresh",
                     "--epochs", "1", "--steps-per-epoch", "1",
                     "--no-reconstruction", "--data-dir",
                     str(tmp_path / "no-data")]) == 2
    error = capsys.readouterr().err
    assert "is not an export written by keras_caps" in error, error
    assert folder_contents(run / "export") == before


def test_a_full_disk_keeps_the_previous_export_and_names_the_folder(
        exported, tmp_path, capsys):
    """A real full filesystem: room for one export, not for the next."""
    size = sum(len(data) for data in
               folder_contents(exported / "export").values())
    with tiny_disk(tmp_path / "disk", f"{size * 3 // 2 >> 10}k") as disk:
        shutil.copytree(exported / "export", disk / "export")
        before = folder_contents(disk / "export")
        assert cli.main(["export", "--model-path",
                         str(exported / "model.keras"), "--export-dir",
                         str(disk / "export"), "--overwrite"]) == 1
        error = capsys.readouterr().err
        assert error.count("\n") == 1, error
        assert "No space left on device" in error, error
        assert repr(str(disk / "export")) in error, error
        assert os.listdir(disk) == ["export"]
        assert folder_contents(disk / "export") == before


@pytest.mark.parametrize("record", ["run.json", "compare.json"])
def test_export_overwrite_never_replaces_a_runs_own_export(
        exported, tmp_path, record, capsys):
    """Only `train` writes a run's `export/` (#27 review): an export of
    another model there is refused, `--overwrite` or not."""
    run = tmp_path / "run"
    shutil.copytree(exported / "export", run / "export")
    (run / record).write_text("{}")
    target = run / "export"
    if record == "compare.json":  # A model's run inside a comparison.
        target = run / "models" / "capsnet" / "export"
        shutil.copytree(run / "export", target)
    before = folder_contents(run)
    assert cli.main(["export", "--model-path",
                     str(exported / "model.keras"), "--export-dir",
                     str(target), "--overwrite"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    owner = "training run" if record == "run.json" else "comparison"
    assert f"it belongs to the {owner} in {str(run)!r}" in error, error
    assert folder_contents(run) == before


def test_a_failed_rollback_keeps_the_previous_export_and_says_where(
        tmp_path, monkeypatch):
    """If putting the previous export back fails too (#27 review), it is
    moved out of the `.retired-*` folder (which a run deletes) and the
    error names where it is."""
    from keras_caps.export import saved_model

    path = str(tmp_path / "export")
    os.makedirs(os.path.join(path, "variables"))
    (tmp_path / "export" / "variables" / "mine.txt").write_text("previous")
    written = str(tmp_path / ".export-new")
    os.makedirs(written)
    real_replace = os.replace

    def failing_replace(source, target):
        if source == written or os.path.basename(source) == "model":
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError) as error:
        saved_model._replace_previous(written, path)
    monkeypatch.undo()
    (kept,) = [name for name in os.listdir(tmp_path)
               if name.startswith("export.previous-")]
    assert repr(str(tmp_path / kept)) in str(error.value)
    assert "Replacing the export" in str(error.value)
    assert (tmp_path / kept / "variables" / "mine.txt").read_text() == (
        "previous")
    assert not [name for name in os.listdir(tmp_path)
                if name.startswith(".retired-")]
