"""The dataset a test builds each recipe of `keras-caps train` for."""

import pytest

_CANDIDATE_DATASETS = ("mnist", "cifar10", "smallnorb")


def dataset_for(recipe):
    """The first of mnist, cifar10 and smallnorb the recipe has a preset for.

    Skips the calling test when it has none of them.
    """
    for dataset in _CANDIDATE_DATASETS:
        try:
            recipe.get_preset(dataset)
        except (ValueError, KeyError):
            continue
        return dataset
    pytest.skip("no preset for any of " + ", ".join(_CANDIDATE_DATASETS))
