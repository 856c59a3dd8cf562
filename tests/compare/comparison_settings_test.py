"""`ComparisonSettings`: the schema of `compare.json`, checked and resolved."""

import contextlib
import io
import json
import pathlib

import pytest

from keras_caps import cli
from keras_caps.compare import ComparisonSettings
from keras_caps.compare import comparison
from keras_caps.testing import synthetic_digits
from keras_caps.testing import write_idx_dataset

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "results"

pytestmark = pytest.mark.single_backend


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*/compare.json")),
                         ids=lambda path: path.parent.name)
def test_the_committed_records_read_and_write_back_unchanged(path):
    record = json.loads(path.read_text())
    settings = ComparisonSettings.from_record(record)
    assert settings.to_record() == record
    assert settings.routers == tuple(record["routers"])
    assert settings.corruptions == record["corruptions"]


def test_optional_fields_are_recorded_only_when_set():
    record = ComparisonSettings(("cnn",), seeds=[3]).to_record()
    assert list(record) == [
        "routers", "dataset", "seeds", "epochs", "steps_per_epoch",
        "batch_size", "validation", "reconstruction", "corruptions",
        "evaluation_seed", "adapt_batchnorm", "stem_normalization", "data"]
    assert record["seeds"] == [3]
    record = ComparisonSettings(
        ("cnn",), "smallnorb", viewpoints="azimuth", until_accuracy=0.9,
        attacks={"fgsm": [0.1]}).to_record()
    assert record["viewpoints"] == "azimuth"
    assert record["until_accuracy"] == 0.9
    assert record["attacks"] == {"fgsm": [0.1]}
    record = ComparisonSettings(("cnn",),
                                equivalence_margin=0.005).to_record()
    assert record["equivalence_margin"] == 0.005
    assert ComparisonSettings.from_record(record).equivalence_margin == 0.005


def test_an_earlier_record_takes_the_defaults_it_did_not_write():
    settings = ComparisonSettings.from_record(
        {"routers": ["cnn"], "seeds": [0], "corruptions": None})
    assert settings.adapt_batchnorm is False
    assert settings.stem_normalization == "batch"
    assert settings.attacks is None


@pytest.mark.parametrize("fields, error, message", [
    (dict(routers=("dynamic", "nope")), ValueError,
     r"Unknown routers \['nope'\]"),
    (dict(routers=("cnn", "cnn")), ValueError, "Duplicate routers"),
    (dict(seeds=3), TypeError, "list of seeds.*seeds=3"),
    (dict(seeds=(1, 1)), ValueError, "Duplicate seeds"),
    (dict(dataset=7), TypeError, "`dataset`.*dataset=7"),
    (dict(adapt_batchnorm="yes"), TypeError, "adapt_batchnorm"),
    (dict(stem_normalization="layer"), ValueError, "stem_normalization"),
    (dict(evaluation_seed=1.5), TypeError,
     "`evaluation_seed`.*evaluation_seed=1.5"),
    (dict(equivalence_margin=0.0), ValueError, "equivalence_margin=0.0"),
    (dict(equivalence_margin=1.5), ValueError,
     r"in \(0, 1\), e.g. 0.005 for half a point"),
])
def test_bad_fields_are_refused_on_construction(fields, error, message):
    with pytest.raises(error, match=message):
        ComparisonSettings(**fields)


def test_a_record_with_unknown_fields_is_refused():
    with pytest.raises(ValueError, match=r"fields \['budgets'\].*newer"):
        ComparisonSettings.from_record({"routers": ["cnn"], "budgets": [1]})
    with pytest.raises(ValueError, match="JSON object"):
        ComparisonSettings.from_record(["cnn"])


def test_resolve_fills_in_the_preset_and_the_data(tmp_path):
    data_dir = write_idx_dataset(str(tmp_path / "mnist"),
                                 synthetic_digits(8), synthetic_digits(4))
    settings = ComparisonSettings(("cnn",), "mnist", seeds=(0,),
                                  corruptions={"noise": [0.2]})
    resolved = settings.resolve(data_dir=data_dir, download=False)
    # The CapsuleClassifier preset's recipe (Efficient-CapsNet's).
    assert (resolved.epochs, resolved.batch_size) == (150, 16)
    assert resolved.corruptions == {"affine": False, "noise": [0.2],
                                    "pixels": [], "occlusion": []}
    # The data by content: each raw file's size and SHA-256.
    assert sorted(resolved.data["files"]) == [
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]
    assert settings.data is None  # Frozen: resolving made a new record.
    assert resolved.training_settings("cnn", 0).model == "cnn"
    assert resolved.models() == [("cnn", 0)]


def test_compare_takes_one_settings_record(tmp_path):
    with pytest.raises(TypeError, match="`ComparisonSettings`"):
        comparison.compare(["cnn"], output_dir=str(tmp_path / "compare"))
    assert not (tmp_path / "compare").exists()


def test_an_unprepared_dataset_without_downloads_writes_nothing(tmp_path):
    # With downloads off, a TFDS dataset missing from the data folder is
    # refused before compare.json claims the folder (it was written before
    # the first model's training found the data missing).
    output_dir = tmp_path / "runs" / "compare"
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = cli.main(["compare", "--dataset", "smallnorb", "--routers",
                         "cnn", "--no-download", "--data-dir",
                         str(tmp_path / "empty"), "--output-dir",
                         str(output_dir)])
    assert code == 2
    assert "'smallnorb' is not prepared" in stderr.getvalue()
    assert "Downloads are off" in stderr.getvalue()
    assert not (tmp_path / "runs").exists()


def test_the_equivalence_margin_changes_the_report_not_the_comparison(
        tmp_path):
    # A finished comparison reports again with another margin (or none);
    # its compare.json then records the margin of the latest report.
    import json

    from keras_caps.compare.comparison_folder import claim_output_dir

    folder = str(tmp_path / "compare")
    for margin in (0.005, None, 0.01):
        claim_output_dir(folder, ComparisonSettings(
            ("cnn",), seeds=[0], equivalence_margin=margin))
        with open(tmp_path / "compare" / "compare.json") as file:
            assert json.load(file).get("equivalence_margin") == margin
    with pytest.raises(ValueError, match="seeds"):
        claim_output_dir(folder, ComparisonSettings(("cnn",), seeds=[1]))


def test_compare_takes_the_margin_in_points():
    from keras_caps.cli import build_parser
    from keras_caps.cli import compare_command

    args = build_parser().parse_args(
        ["compare", "--routers", "cnn", "--equivalence-margin", "0.5"])
    assert compare_command._settings(args).equivalence_margin == 0.005
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            ["compare", "--equivalence-margin", "0"])
