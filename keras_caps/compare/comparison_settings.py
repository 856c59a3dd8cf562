"""`ComparisonSettings`: what a comparison is, the schema of `compare.json`.

A comparison is made of settings (this record, passed whole to
`keras_caps.compare.compare`) and of run options that do not change its
result (its folder, isolation, workers, shard). The checks below are those
`ComparisonSettings.resolve` runs before anything is written.
"""

import dataclasses
import json
import os

import numpy as np

from keras_caps.applications.capsule_classifier import (
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    STEM_NORMALIZATIONS,
)
from keras_caps.compare import multi_digit_comparison
from keras_caps.compare import user_data_comparison
from keras_caps.compare.compared_models import check_controls
from keras_caps.compare.compared_models import check_routers
from keras_caps.compare.compared_models import default_models
from keras_caps.compare.compared_models import model_reconstruction
from keras_caps.datasets.data_record import data_record
from keras_caps.datasets.sources import check_tfds_prepared
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.datasets.viewpoints import check_viewpoints
from keras_caps.evaluation import attack_evaluation
from keras_caps.evaluation import robustness
from keras_caps.training.training_settings import TrainingSettings
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice


def check_attack_settings(attacks, user_data):
    """The comparison's attacks, checked; `None` without attacks."""
    attacks = attack_evaluation.check_attacks(attacks)
    if attacks and user_data:
        raise ValueError(
            "The attacks read the built-in datasets' test sets; a "
            "comparison on a user's dataset measures clean accuracy only. "
            f"Drop them. Received: attacks={attacks!r}")
    return attacks or None


def user_data_settings(routers, dataset, corruptions, preset, read_options,
               data_dir, download):
    """`(preset, data record)` of a dataset a user brings (read and
    checked here), `(preset, None)` for a built-in one."""
    if is_user_dataset(dataset):
        if corruptions and any(corruptions.values()):
            raise ValueError(
                "The corruptions read the built-in datasets' test sets; a "
                f"comparison on {dataset} measures clean accuracy only. "
                f"Drop them. Received: corruptions={corruptions!r}")
        return user_data_comparison.read_comparison_data(
            check_routers(routers)[0], dataset, preset,
            read_options, data_dir=data_dir, download=download)
    if preset is not None or any((read_options or {}).values()):
        raise ValueError(
            "`preset` and `read_options` (--preset, --image-size, "
            "--color-mode, --test-dir, --test-share) apply to datasets a "
            f"user brings only; {dataset!r} has its own. Received: "
            f"preset={preset!r}, read_options={read_options!r}")
    return preset, None


def check_settings(routers, dataset, seeds, epochs, steps_per_epoch,
                    batch_size, validation, reconstruction, corruptions,
                    evaluation_seed, preset=None, until_accuracy=None):
    """The recipe's fields of the comparison's settings, checked and
    resolved (the preset's epochs and batch size, the checked corruptions);
    `preset`: that of a user's dataset (then recorded; user data is scored
    on clean test images only)."""
    routers = check_routers(routers)
    seeds = _check_seeds(seeds)
    if preset is None and dataset not in CAPSULE_CLASSIFIER_PRESETS:
        raise ValueError(
            "Unknown `dataset`. Expected one of "
            f"{sorted(CAPSULE_CLASSIFIER_PRESETS)}. Received: "
            f"dataset={dataset!r}")
    check_controls(routers, preset or dataset, reconstruction)
    # The recipe's fields are those of each model's `TrainingSettings`,
    # checked as such.
    recipe = TrainingSettings(
        routers[0], dataset, epochs=epochs,
        steps_per_epoch=steps_per_epoch, batch_size=batch_size,
        validation=validation, preset=preset, until_accuracy=until_accuracy)
    if preset is not None:
        recipe.resolve()  # Refuses a preset the compared models lack.
        corruptions = dict(user_data_comparison.NO_CORRUPTIONS)
    else:
        corruptions = robustness.check_corruptions(dataset, corruptions)
    defaults = CAPSULE_CLASSIFIER_PRESETS[preset or dataset]
    settings = {
        "routers": routers, "dataset": dataset, "seeds": seeds,
        "epochs": defaults["epochs"] if epochs is None else recipe.epochs,
        "steps_per_epoch": recipe.steps_per_epoch,
        "batch_size": defaults["batch_size"] if batch_size is None
        else recipe.batch_size,
        "validation": validation,
        "reconstruction": bool(reconstruction),
        "corruptions": corruptions,
        "evaluation_seed": int(evaluation_seed),
    }
    if preset is not None:
        settings["preset"] = preset
    if recipe.until_accuracy is not None:  # Absent: no target (as before).
        settings["until_accuracy"] = recipe.until_accuracy
    return settings


@dataclasses.dataclass(frozen=True)
class ComparisonSettings:
    """What a comparison is: everything that changes its result.

    The schema of `compare.json` (`to_record`, `from_record`): a folder made
    with other settings is refused. The fields are checked on construction
    (a `TypeError` or `ValueError` naming the field); `resolve` adds what
    needs the data (the preset's epochs and batch size, the checked
    corruptions and attacks, the data's record) and is what `compare`
    records.

    Args:
        routers: tuple of str or `None`. Models of
            `keras_caps.applications.MODELS` of the `"router"` and
            `"control"` kinds (`comparable_models()`: the routers of
            `CapsuleClassifier`, `"cnn"` and the controls); `None`:
            `default_models(reconstruction)`.
        dataset: str. A `CapsuleClassifier` preset: `"mnist"`,
            `"fashion_mnist"`, `"smallnorb"`, `"mnist_canvas"` or
            `"multi_mnist"` (two digits an image, scored per digit and by
            exact match; needs `partners_per_digit`); or a dataset a user
            brings, `"folder:PATH"`, `"npz:PATH"` or `"tfds:NAME"` (clean
            accuracy only: no corruptions, attacks or adaptation).
        seeds: tuple of int. One model per router and seed (fewer than 2:
            no interval and no across-seed test).
        epochs, steps_per_epoch, batch_size: The recipe's budget, as in
            `keras_caps.training.train` (`None`: the preset's).
        validation: str. `"holdout"` or `"test"` (see `PROTOCOLS`).
        reconstruction: bool. Train the capsule models with their decoder
            (the CNNs have none; the CNN ladder's `cnn_vectors_decoder`
            always has one and is refused without reconstruction).
        corruptions: dict or `None`; see
            `keras_caps.evaluation.robustness.check_corruptions`.
        evaluation_seed: int. Seeds the corruptions and attacks, the same
            for every model.
        preset: str or `None`. A user's dataset: the `CapsuleClassifier`
            preset every model trains with (`None`: the closest to its
            images, which `resolve` records).
        until_accuracy: float in (0, 1) or `None`. Train each model until
            its holdout accuracy reaches it, at most `epochs` (Sabour et
            al. 2017, section 5.2: models compared at matched accuracy).
        viewpoints: `None`, `"azimuth"` or `"elevation"`: smallnorb only,
            the novel-viewpoint protocol of Hinton, Sabour & Frosst 2018,
            section 5.1.
        partners_per_digit: int or `None`. `"multi_mnist"` only, and needed
            there: the test pairs per MNIST test digit.
        adapt_batchnorm: bool. Also evaluate every model with its
            BatchNorm statistics re-estimated on each test set (it changes
            no model: a finished comparison resumes with or without it).
        stem_normalization: str. `"batch"` or `"group"` (every model's stem
            normalised by GroupNormalization).
        attacks: dict or `None`. Adversarial attacks on every model (see
            `keras_caps.evaluation.attack_evaluation.check_attacks`).
        equivalence_margin: float in (0, 1) or `None`. The largest
            accuracy difference from the reference called no difference
            (0.005: half a point), fixed before the comparison runs: every
            model × column cell also gets two one-sided tests (TOST) that
            its difference lies inside it. It changes no model: a finished
            comparison reports again with another margin.
        data: dict or `None`. The data's record (`resolve` fills it in):
            the data folder and each raw file's size and SHA-256, the TFDS
            dataset's name and version, or a user's dataset's source.

    Example:

    ```python
    settings = ComparisonSettings(("dynamic", "cnn"), "mnist", seeds=(0, 1),
                                  epochs=2, corruptions={"noise": [0.1]})
    compare(settings, output_dir="runs/compare")
    ```
    """

    routers: tuple[str, ...] | None = None
    dataset: str = "mnist"
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    epochs: int | None = None
    steps_per_epoch: int | None = None
    batch_size: int | None = None
    validation: str = "holdout"
    reconstruction: bool = True
    corruptions: dict | None = None
    evaluation_seed: int = 1234
    preset: str | None = None
    until_accuracy: float | None = None
    viewpoints: str | None = None
    partners_per_digit: int | None = None
    adapt_batchnorm: bool = False
    stem_normalization: str = "batch"
    attacks: dict | None = None
    equivalence_margin: float | None = None
    data: dict | None = None

    def __post_init__(self):
        if self.routers is not None:
            object.__setattr__(self, "routers",
                               tuple(check_routers(self.routers)))
        object.__setattr__(self, "seeds", tuple(_check_seeds(self.seeds)))
        if not isinstance(self.dataset, str):
            raise TypeError("Expected `dataset` to be a str. Received: "
                            f"dataset={self.dataset!r}")
        check_bool("adapt_batchnorm", self.adapt_batchnorm)
        check_choice("stem_normalization", self.stem_normalization,
                     STEM_NORMALIZATIONS)
        if (isinstance(self.evaluation_seed, bool)
                or not isinstance(self.evaluation_seed, (int, np.integer))):
            raise TypeError("Expected `evaluation_seed` to be an int. "
                            f"Received: evaluation_seed="
                            f"{self.evaluation_seed!r}")
        object.__setattr__(self, "evaluation_seed", int(self.evaluation_seed))
        _check_equivalence_margin(self.equivalence_margin)

    def resolve(self, *, data_dir=None, download=True, read_options=None):
        """These settings checked against the data, with the preset's
        defaults and the data's record: what `compare` records.

        Args:
            data_dir: str or `None`. The data folder (else
                `$KERAS_CAPS_DATA_DIR`, else TFDS).
            download: bool. Let TFDS download a dataset not prepared.
            read_options: dict or `None`. A user's dataset: how to read it
                (`image_size`, `color_mode`, `test_dir`, `test_share`).

        Returns:
            A new `ComparisonSettings` with every field set.
        """
        check_viewpoints(self.dataset, self.viewpoints)
        routers = (default_models(self.reconstruction)
                   if self.routers is None else self.routers)
        # Checked before a user's dataset is read.
        attacks = check_attack_settings(self.attacks,
                                        is_user_dataset(self.dataset))
        preset, user_data = user_data_settings(
            routers, self.dataset, self.corruptions, self.preset,
            read_options, data_dir, download)
        recipe = check_settings(
            routers, self.dataset, self.seeds, self.epochs,
            self.steps_per_epoch, self.batch_size, self.validation,
            self.reconstruction, self.corruptions, self.evaluation_seed,
            preset, self.until_accuracy)
        partners = multi_digit_comparison.comparison_settings(
            self.dataset, self.partners_per_digit, attacks)
        _refuse_adaptation_on_user_data(self.adapt_batchnorm,
                                        user_data is not None)
        data = (data_record(self.dataset, data_dir) if user_data is None
                else user_data)
        if "tfds" in data and user_data is None:
            # An unprepared dataset is refused before compare.json.
            check_tfds_prepared(data["tfds"]["name"], data["tfds"]["data_dir"],
                                download)
        resolved = dataclasses.replace(
            self, **recipe, attacks=attacks,
            partners_per_digit=partners.get("partners_per_digit"),
            data=data)
        # Refuses, before anything is written, a setting a model lacks
        # (the GroupNorm stem for `sabour_cnn`, ...).
        for router in resolved.routers:
            resolved.training_settings(router, resolved.seeds[0])
        return resolved

    def is_user_data(self):
        """Whether the dataset is a user's (trained on a preset)."""
        return self.preset is not None

    def models(self):
        """`[(router, seed), ...]`: every model, router by router."""
        return [(router, seed) for router in self.routers
                for seed in self.seeds]

    def models_data_dir(self, data_dir):
        """The data folder the models read, absolute: a user's dataset's
        own, else `data_dir` (`None`: the default)."""
        if self.is_user_data():
            return self.data["data_dir"]
        return None if data_dir is None else os.path.abspath(data_dir)

    def training_settings(self, router, seed):
        """The `TrainingSettings` of one model of the comparison.

        Args:
            router: str. One of `comparable_models()`.
            seed: int. One of the comparison's seeds.
        """
        options = {}
        if self.is_user_data():  # A user's dataset, read as recorded.
            options.update(preset=self.preset,
                           data_source=self.data["source"])
        if self.stem_normalization != "batch":  # Left out, as before.
            options["stem_normalization"] = self.stem_normalization
        dataset_options = {}
        if self.viewpoints is not None:
            dataset_options["viewpoints"] = self.viewpoints
        if self.partners_per_digit is not None:
            dataset_options["partners_per_digit"] = self.partners_per_digit
        if dataset_options:
            options["dataset_options"] = dataset_options
        return TrainingSettings(
            router, self.dataset, epochs=self.epochs,
            steps_per_epoch=self.steps_per_epoch,
            batch_size=self.batch_size, seed=seed,
            validation=self.validation,
            # The CNNs have no decoder, the ladder's step 3 always has one.
            reconstruction=model_reconstruction(router, self.reconstruction),
            until_accuracy=self.until_accuracy, **options)

    def to_record(self):
        """The `compare.json` record: JSON types, and the optional fields
        only when set (as the records of earlier versions, which lacked
        them, so those compare equal)."""
        record = {name: getattr(self, name) for name in _ALWAYS_RECORDED}
        record.update(routers=None if self.routers is None
                      else list(self.routers), seeds=list(self.seeds))
        for name in _RECORDED_WHEN_SET:
            if getattr(self, name) is not None:
                record[name] = getattr(self, name)
        record["adapt_batchnorm"] = self.adapt_batchnorm
        record["stem_normalization"] = self.stem_normalization
        if self.attacks:
            record["attacks"] = self.attacks
        record["data"] = self.data
        return json.loads(json.dumps(record))

    @classmethod
    def from_record(cls, record):
        """The settings a `compare.json` (or a `results.json`'s
        `"settings"`) records; fields it lacks take their defaults (an
        earlier keras_caps did not write them)."""
        if not isinstance(record, dict):
            raise ValueError("Expected the comparison's settings record to "
                             f"be a JSON object. Received: {record!r}")
        unknown = sorted(set(record) - {field.name for field in
                                         dataclasses.fields(cls)})
        if unknown:
            raise ValueError(
                f"The comparison's settings record has fields {unknown} "
                "that this keras_caps does not know (written by a newer "
                f"one?). Received: {sorted(record)}")
        fields = dict(record)
        for name in ("routers", "seeds"):
            if fields.get(name) is not None:
                fields[name] = tuple(fields[name])
        return cls(**fields)


# `to_record`'s order, as `compare.json` has always had it.
_ALWAYS_RECORDED = ("routers", "dataset", "seeds", "epochs",
                    "steps_per_epoch", "batch_size", "validation",
                    "reconstruction", "corruptions", "evaluation_seed")
_RECORDED_WHEN_SET = ("preset", "until_accuracy", "viewpoints",
                      "partners_per_digit", "equivalence_margin")


def _check_equivalence_margin(margin):
    """Refuses a margin that is not an accuracy difference in (0, 1)."""
    if margin is None:
        return
    if (isinstance(margin, bool) or not isinstance(
            margin, (int, float, np.floating))
            or not 0.0 < float(margin) < 1.0):
        raise ValueError(
            "Received an invalid value for `equivalence_margin` "
            "(--equivalence-margin, in points), expected an accuracy "
            "difference in (0, 1), e.g. 0.005 for half a point. Received: "
            f"equivalence_margin={margin!r}")


def _refuse_adaptation_on_user_data(adapt_batchnorm, user_data):
    """A user's dataset is evaluated on clean images only, so without
    BatchNorm adaptation."""
    if adapt_batchnorm and user_data:
        raise ValueError(
            "`adapt_batchnorm` (--adapt-batchnorm) re-estimates BatchNorm "
            "statistics on the built-in datasets' corrupted test sets; a "
            "comparison on a user's dataset measures clean accuracy only. "
            "Drop it. Received: adapt_batchnorm=True")


def with_normalization_defaults(record):
    """A `compare.json` record with `ComparisonSettings`' defaults for
    `adapt_batchnorm` and `stem_normalization`, the keys an earlier
    keras_caps did not write (its models have BatchNorm stems and its
    evaluations no adaptation)."""
    if not isinstance(record, dict):
        return record
    defaults = {field.name: field.default
                for field in dataclasses.fields(ComparisonSettings)
                if field.name in ("adapt_batchnorm", "stem_normalization")}
    return {**defaults, **record}


def _check_seeds(seeds):
    if isinstance(seeds, int):
        raise TypeError("Expected a list of seeds. Received: "
                        f"seeds={seeds!r}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("Expected at least one seed. Received: seeds=[]")
    if any(isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
           for seed in seeds):
        raise TypeError(f"Seeds must be integers. Received: seeds={seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"Duplicate seeds. Received: seeds={seeds!r}")
    return [int(seed) for seed in seeds]


def check_reference(reference, routers):
    """The model the others are tested against: `reference`, else the
    first of `routers`."""
    if reference is None:
        return routers[0]
    if reference not in routers:
        raise ValueError(
            "Received an invalid value for `reference`, expected one of the "
            f"compared models {list(routers)}. Received: "
            f"reference={reference!r}")
    return reference


