"""The attack flags of `keras-caps evaluate` and `compare` under bad input:
a clear error, exit status 2, nothing written."""

import os

import pytest

from keras_caps import cli
from keras_caps.applications import CNNBaseline
from keras_caps.cli.attack_arguments import requested_attacks


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    path = str(folder / "model.keras")
    CNNBaseline("mnist", compile=True).save(path)
    return path


def _evaluate(saved_model, tmp_path, *flags):
    return cli.main(["evaluate", "--model-path", saved_model,
                     "--output", str(tmp_path / "metrics.json"),
                     "--predictions-dir", str(tmp_path / "predictions"),
                     *flags])


@pytest.mark.parametrize("flags, message", [
    (["--fgsm", "-0.1"], "argument --fgsm: expected comma-separated "
     "epsilons in [0, 1]"),
    (["--pgd", "0.1,1.5"], "argument --pgd: expected comma-separated "
     "epsilons in [0, 1]"),
    (["--pgd", "0.1", "--pgd-steps", "0"],
     "argument --pgd-steps: expected a positive integer, received '0'"),
    (["--pgd", "0.1", "--pgd-restarts", "-1"],
     "argument --pgd-restarts: expected a positive integer"),
    (["--pgd", "0.1", "--attack-loss", "hinge"],
     "argument --attack-loss: invalid choice: 'hinge'"),
    (["--pgd", "0.1", "--masking-epsilon", "2"],
     "argument --masking-epsilon: expected comma-separated epsilons"),
])
@pytest.mark.single_backend
def test_parser_refuses_bad_attack_values(flags, message, saved_model,
                                          tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _evaluate(saved_model, tmp_path, *flags)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flags, message", [
    (["--vote-attack"], "--vote-attack runs the vote attack at the --pgd "
     "epsilons, and none is given"),
    (["--fgsm", "0.1", "--vote-attack"], "add --pgd"),
    (["--pgd-steps", "20"], "--pgd-steps set the attacks of --fgsm and "
     "--pgd, and neither is given"),
    (["--pgd", "0.1,0.1"], "Duplicate epsilons in --pgd"),
    (["--fgsm", "0.1", "--dataset", "multi_mnist"],
     "do not apply to MultiMNIST"),
])
@pytest.mark.single_backend
def test_evaluate_refuses_bad_attack_combinations(flags, message,
                                                  saved_model, tmp_path,
                                                  capsys):
    assert _evaluate(saved_model, tmp_path, *flags) == 2
    assert message in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.single_backend
def test_evaluate_refuses_attacks_without_gradients(saved_model, tmp_path,
                                                    capsys):
    exported = str(tmp_path / "exported")
    assert cli.main(["export", "--model-path", saved_model, "--export-dir",
                     exported]) == 0
    capsys.readouterr()
    output = tmp_path / "out"
    output.mkdir()
    for source, message in (
            (["--model-path", exported], "a folder (an exported SavedModel)"
             " has none keras_caps can take"),
            (["--weights", str(tmp_path / "official.h5")],
             "use them with `--model-path`, not `--weights`")):
        code = cli.main(["evaluate", *source, "--fgsm", "0.1", "--output",
                         str(output / "metrics.json")])
        assert code == 2
        assert message in capsys.readouterr().err
        assert os.listdir(output) == []


@pytest.mark.single_backend
def test_compare_attack_flags(tmp_path, capsys):
    args = cli.build_parser().parse_args([
        "compare", "--fgsm", "0.05,0.1", "--pgd", "0.1", "--pgd-steps", "20",
        "--pgd-restarts", "2", "--attack-loss", "cross_entropy",
        "--vote-attack", "--masking-epsilon", "0"])
    assert requested_attacks(args) == {
        "fgsm": [0.05, 0.1], "pgd": [0.1], "pgd_steps": 20,
        "pgd_restarts": 2, "loss": "cross_entropy", "vote": True,
        "large_epsilon": None}
    output_dir = tmp_path / "compare"
    code = cli.main(["compare", "--output-dir", str(output_dir),
                     "--vote-attack", "--fgsm", "0.1"])
    assert code == 2
    assert "add --pgd" in capsys.readouterr().err
    # A user's dataset has no attacked test sets: refused before training.
    code = cli.main(["compare", "--output-dir", str(output_dir), "--dataset",
                     f"npz:{tmp_path / 'data.npz'}", "--pgd", "0.1"])
    assert code == 2
    assert ("The attacks read the built-in datasets' test sets; a "
            "comparison on a user's dataset measures clean accuracy only"
            in capsys.readouterr().err)
    assert not output_dir.exists()
