"""`TrainingSettings`: everything that changes the result of a training run.

The settings of one run are one value, checked once, in one schema: the
`settings` of the run's `run.json` (see `RunFolder`) and the first entries
of its `metrics.json` are `TrainingSettings.to_record()`, and a comparison
(`keras-caps compare`) hands each model's settings to the process that
trains it in the same form. How a run is carried out (its folder, the
distribution strategy, the data folder, logging) is not part of them: those
are the other arguments of `keras_caps.training.train`.
"""

import dataclasses
import inspect
import numbers

from keras_caps import datasets
from keras_caps.applications import MODELS
from keras_caps.applications import check_model_name
from keras_caps.applications import current_model_name
from keras_caps.datasets.user_data.user_dataset import is_user_dataset
from keras_caps.datasets.viewpoints import check_viewpoints
from keras_caps.schedules import ExponentialTemperatureDecay
from keras_caps.training.preset_choice import closest_preset
from keras_caps.validation import check_bool
from keras_caps.validation import check_known_name
from keras_caps.validation import check_positive_int
from keras_caps.validation import check_temperature

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PROTOCOLS = {
    "holdout": "holdout (model selected on 10% of the training data)",
    "test": "test-as-validation (official)",
}
# The record's keys (run.json's `settings`); `routing_temperature` only when
# the temperature is annealed, `preset` and `data_source` only for a
# dataset a user brings.
RECORD_KEYS = ("model", "dataset", "protocol", "epochs", "steps_per_epoch",
               "batch_size", "precision", "seed", "reconstruction",
               "deterministic", "dataset_options", "routing_temperature",
               "preset", "data_source", "until_accuracy",
               "stem_normalization")
# `until_accuracy` and `stem_normalization` only when set: a record without
# them (written before they existed) resumes as "no target" and the
# builder's default stem.
_OPTIONAL_KEYS = ("routing_temperature", "preset", "data_source",
                  "until_accuracy", "stem_normalization")
# The only loader option of a dataset a user brings.
USER_DATA_OPTIONS = ("augment",)
# The schedule's argument names -> the settings' (for error messages).
_SCHEDULE_ARGUMENTS = (("initial_temperature", "routing_temperature"),
                       ("decay_rate", "temperature_decay"),
                       ("minimum_temperature", "min_temperature"))
_MAX_SEED = 2**32 - 1  # What NumPy's seeding takes.


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """The settings of one training run: what changes its result.

    Every field is checked on construction (a `TypeError` or `ValueError`
    naming the field, what was expected and what was received). `None`
    fields take the model preset's value in `resolve()`, which is what a
    run records.

    Args:
        model: str. A key of `keras_caps.applications.MODELS`.
        dataset: str. A key of `keras_caps.datasets.DATASETS`, or a
            dataset a user brings: `"folder:PATH"`, `"npz:PATH"` or
            `"tfds:NAME"` (see `keras_caps.datasets.user_data.user_dataset`).
        epochs: int or `None` (the preset's; 150 for EfficientCapsNet).
        batch_size: int or `None`. The global batch size (the preset's;
            16 for EfficientCapsNet).
        steps_per_epoch: int or `None`. Limit the steps of each epoch.
        precision: str. One of `PRECISIONS`.
        seed: int in `[0, 2**32 - 1]`. Seeds weights, shuffling,
            augmentation and splits.
        validation: str. `"holdout"` (select on held-out training data) or
            `"test"` (the official protocol); see `PROTOCOLS`.
        reconstruction: bool or `None` (with the decoder when the model
            has one).
        deterministic: bool. Deterministic kernels (TensorFlow op
            determinism; see `backend_runtime.enable_determinism` for JAX
            and PyTorch).
        dataset_options: dict or `None`. Extra loader options (e.g.
            MultiMNIST's `partners_per_digit`, or smallNORB's
            `viewpoints`: train on the familiar viewpoints, validate on
            their holdout and also test on the familiar and the novel
            viewpoints, see `keras_caps.datasets.smallnorb.load`), over
            the model recipe's.
            A dataset a user brings takes only `augment` (random shifts of
            up to 10 %; defaults to on when the preset's recipe shifts its
            images, as CapsNet's does, else off).
        routing_temperature: float or `None`. `tau_0` of the annealed
            routing temperature; `None`: the routers' own temperature, not
            annealed (then `temperature_decay` and `min_temperature`,
            which need `tau_0`, are refused).
        temperature_decay: float. The decay per training step, `lambda`
            in `tau_t = max(tau_min, tau_0 exp(-lambda t))`; refused when
            the temperature starts at its floor (nothing to anneal).
        min_temperature: float or `None`. `tau_min` (`min(1, tau_0)`).
        preset: str or `None`. A dataset a user brings only: the built-in
            dataset whose preset of the model (architecture and recipe) is
            used; `None`: the closest by input size (`closest_preset`).
        data_source: dict or `None`. A dataset a user brings only: its
            `UserDataset.source_record()` (path, image size, colour mode,
            class names, test data, content fingerprint), which
            `keras_caps.training.train` fills in when it reads the data;
            a run whose data changed is refused on resume.
        until_accuracy: float in (0, 1) or `None`. Train until the
            validation accuracy (checked at each epoch's end) reaches this
            value, at most `epochs` epochs: Sabour et al. 2017 (section 5.2)
            compare models at matched clean accuracy. The selected model is
            then the first epoch that reached it (else the usual best).
            Refused with `validation="test"`: stopping when the test
            accuracy reaches the target would make the test set a training
            decision, and the test accuracy reported afterwards would be at
            least the target by construction, not a measurement.
        stem_normalization: str or `None`. The builder's
            `stem_normalization` (`"batch"` or `"group"`, for the models
            whose builder takes it: `CapsuleClassifier`, `CNNBaseline`,
            `PositionCNN`, `VectorCNN`);
            `None`: the builder's default, and not recorded (so records
            written before it existed read the same).

    Example:

    ```python
    settings = TrainingSettings(model="capsnet", dataset="mnist", epochs=3)
    resolved = settings.resolve()  # The preset's batch size (128), ...
    record = resolved.to_record()  # run.json's `settings`.
    assert TrainingSettings.from_record(record) == resolved
    ```
    """

    model: str = "efficient_capsnet"
    dataset: str = "mnist"
    epochs: int | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    precision: str = "float32"
    seed: int = 42
    validation: str = "holdout"
    reconstruction: bool | None = None
    deterministic: bool = False
    dataset_options: dict | None = None
    routing_temperature: float | None = None
    temperature_decay: float = 0.0
    min_temperature: float | None = None
    preset: str | None = None
    data_source: dict | None = None
    until_accuracy: float | None = None
    stem_normalization: str | None = None

    def __post_init__(self):
        check_model_name(self.model)
        if not self.is_user_data():
            check_known_name("dataset", self.dataset, datasets.DATASETS)
        self._check_user_data_fields()
        check_known_name("precision", self.precision, PRECISIONS)
        check_known_name("validation", self.validation, PROTOCOLS)
        for name in ("epochs", "batch_size", "steps_per_epoch"):
            if getattr(self, name) is not None:
                self._set(name, check_positive_int(name, getattr(self, name)))
        self._set("seed", _check_seed(self.seed))
        if self.reconstruction is not None:
            check_bool("reconstruction", self.reconstruction)
        check_bool("deterministic", self.deterministic)
        self._set("dataset_options",
                  _check_dataset_options(self.dataset_options))
        # smallNORB's novel-viewpoint splits only (Hinton et al. 2018).
        check_viewpoints(self.dataset,
                         self.dataset_options.get("viewpoints"))
        self.temperature_schedule()  # Checks the three temperature fields.
        self._set("until_accuracy", _check_until_accuracy(
            self.until_accuracy, self.validation))
        self._check_stem_normalization()

    def _check_stem_normalization(self):
        if self.stem_normalization is None:
            return
        check_known_name("stem_normalization", self.stem_normalization,
                         ("batch", "group"))
        builder = MODELS[self.model].family.builder
        if "stem_normalization" not in inspect.signature(
                builder).parameters:
            raise ValueError(
                f"The model {self.model!r} has no `stem_normalization` "
                "option (CapsuleClassifier, CNNBaseline, PositionCNN and "
                "VectorCNN have). Drop it. "
                f"Received: stem_normalization={self.stem_normalization!r}")

    def builder_options(self):
        """The builder arguments these settings fix beyond the preset
        (`stem_normalization` when set), for `ModelFamily.build`."""
        if self.stem_normalization is None:
            return {}
        return {"stem_normalization": self.stem_normalization}

    def is_user_data(self):
        """Whether `dataset` is a dataset a user brings (`folder:`, ...)."""
        return is_user_dataset(self.dataset)

    def _check_user_data_fields(self):
        if not self.is_user_data():
            given = {name: getattr(self, name) for name in
                     ("preset", "data_source")
                     if getattr(self, name) is not None}
            if given:
                raise ValueError(
                    "Only datasets a user brings (folder:PATH, npz:PATH, "
                    f"tfds:NAME) take {' and '.join(map(repr, given))}; "
                    f"{self.dataset!r} has its own preset and data."
                    f" Received: dataset={self.dataset!r}, "
                    + ", ".join(f"{name}={value!r}"
                                for name, value in given.items()))
            return
        if self.preset is not None:
            check_known_name("preset", self.preset, datasets.DATASETS)
        if self.data_source is not None and not isinstance(
                self.data_source, dict):
            raise TypeError(
                "Received an invalid value for `data_source`, expected "
                "None or a dict (`UserDataset.source_record()`). Received: "
                f"data_source={self.data_source!r}")

    def preset_name(self):
        """The name of the model preset these settings train with: the
        dataset's, or for a dataset a user brings `preset` (else the
        closest to its images, which needs `data_source`)."""
        if not self.is_user_data():
            return self.dataset
        if self.preset is not None:
            return self.preset
        if self.data_source is None:
            raise ValueError(
                f"The preset for {self.dataset!r} is chosen by the size of "
                "its images, which are not read yet: pass `preset` or the "
                "`data_source` (`UserDataset.source_record()`).")
        height, width = self.data_source["image_size"]
        channels = 1 if self.data_source["color_mode"] == "grayscale" else 3
        return closest_preset(self.model, (height, width, channels))

    def _set(self, name, value):
        object.__setattr__(self, name, value)  # Normalised, once, here.

    def temperature_schedule(self):
        """The routing temperature's annealing schedule, or `None`.

        Returns:
            A `keras_caps.schedules.ExponentialTemperatureDecay`, or `None`
            when the temperature is not annealed.
        """
        if self.routing_temperature is None and not (
                self.temperature_decay) and self.min_temperature is None:
            return None
        if self.routing_temperature is None:
            # Annealing from an implicit 1 down to a default floor of 1
            # would silently keep the temperature at 1.
            raise ValueError(
                "`temperature_decay` and `min_temperature` anneal the "
                "routing temperature from `routing_temperature` (tau_0, "
                "`--routing-temperature`), which is not set. Set it (e.g. "
                "routing_temperature=4.0), or drop them. Received: "
                f"temperature_decay={self.temperature_decay!r}, "
                f"min_temperature={self.min_temperature!r}")
        initial = check_temperature("routing_temperature",
                                    self.routing_temperature)
        minimum = self.min_temperature
        if minimum is None:
            minimum = min(1.0, initial)
        schedule = _schedule(initial, self.temperature_decay, minimum)
        if schedule.decay_rate and (schedule.minimum_temperature
                                    == schedule.initial_temperature):
            raise ValueError(
                "`temperature_decay` has no effect: the temperature starts "
                f"at its floor ({initial!r}; `min_temperature` defaults to "
                "min(1, routing_temperature)). Set a lower "
                "`min_temperature` or a higher `routing_temperature`. "
                f"Received: routing_temperature={self.routing_temperature!r}"
                f", temperature_decay={self.temperature_decay!r}, "
                f"min_temperature={self.min_temperature!r}")
        return schedule

    def resolve(self):
        """These settings with every default taken from the model preset.

        Fills in the preset's epochs and batch size, whether to train with
        the decoder, the recipe's loader options (under this run's) and the
        temperature schedule's defaults. Raises a `ValueError` for a
        dataset the model has no preset for, or `reconstruction=True` on a
        model without a decoder.

        Returns:
            A new `TrainingSettings`; resolving it again changes nothing.
        """
        family = MODELS[self.model].family
        preset_name = self.preset_name()
        if self.is_user_data() and preset_name not in family.presets:
            raise ValueError(
                f"{family.name} has no preset for {preset_name!r}. Expected "
                f"`preset` (--preset) to be one of {sorted(family.presets)}"
                f". Received: preset={preset_name!r}")
        preset = family.get_preset(preset_name)
        resolved = {
            "epochs": preset["epochs"] if self.epochs is None
            else self.epochs,
            "batch_size": preset["batch_size"] if self.batch_size is None
            else self.batch_size,
            "reconstruction": family.resolve_reconstruction(
                self.reconstruction),
            "dataset_options": self._resolved_dataset_options(
                family, preset_name),
        }
        if self.is_user_data():
            resolved["preset"] = preset_name
        schedule = self.temperature_schedule()
        if schedule is not None:
            resolved.update(
                routing_temperature=schedule.initial_temperature,
                temperature_decay=schedule.decay_rate,
                min_temperature=schedule.minimum_temperature)
        return dataclasses.replace(self, **resolved)

    def _resolved_dataset_options(self, family, preset_name):
        recipe = family.dataset_options(preset_name)
        if not self.is_user_data():
            return {**recipe, **self.dataset_options}
        unknown = sorted(set(self.dataset_options) - set(USER_DATA_OPTIONS))
        if unknown:
            raise ValueError(
                f"Unknown `dataset_options` {unknown} for {self.dataset!r}: "
                f"a dataset a user brings takes only {list(USER_DATA_OPTIONS)}"
                f". Received: dataset_options={self.dataset_options!r}")
        # On when the preset's recipe shifts its images (CapsNet's).
        augment = bool(recipe.get("augmentation") or recipe.get("shift"))
        options = {"augment": augment, **self.dataset_options}
        check_bool("dataset_options['augment']", options["augment"])
        return options

    def to_record(self):
        """The settings as JSON: run.json's `settings` (see `RECORD_KEYS`).

        The validation protocol is recorded by its description (e.g.
        `"test-as-validation (official)"`), and the temperature, when
        annealed, as the schedule's config under `routing_temperature`.
        """
        record = {
            "model": self.model, "dataset": self.dataset,
            "protocol": PROTOCOLS[self.validation],
            "epochs": self.epochs, "steps_per_epoch": self.steps_per_epoch,
            "batch_size": self.batch_size, "precision": self.precision,
            "seed": self.seed, "reconstruction": self.reconstruction,
            "deterministic": self.deterministic,
            "dataset_options": dict(self.dataset_options),
        }
        schedule = self.temperature_schedule()
        if schedule is not None:
            record["routing_temperature"] = schedule.get_config()
        if self.is_user_data():
            record["preset"] = self.preset
            record["data_source"] = self.data_source
        if self.until_accuracy is not None:
            record["until_accuracy"] = self.until_accuracy
        if self.stem_normalization is not None:
            record["stem_normalization"] = self.stem_normalization
        return record

    @classmethod
    def from_record(cls, record):
        """The settings of a record written by `to_record` (a `run.json`),
        with the model's current name when an earlier version wrote it
        (`keras_caps.applications.current_model_name`).

        Raises:
            TypeError, ValueError: when `record` is not such a record
                (not a dict, unknown or missing keys, an unknown protocol,
                or a field that fails its check).
        """
        if not isinstance(record, dict):
            raise TypeError(
                "Expected a settings record (a dict with the keys "
                f"{list(RECORD_KEYS)}). Received: record={record!r} of type "
                f"{type(record).__name__}")
        unknown = sorted(set(record) - set(RECORD_KEYS))
        missing = [key for key in RECORD_KEYS
                   if key not in record and key not in _OPTIONAL_KEYS]
        if unknown or missing:
            raise ValueError(
                f"Expected a settings record with the keys "
                f"{list(RECORD_KEYS)} ({list(_OPTIONAL_KEYS)} optional). "
                f"Unknown keys: {unknown}; missing keys: {missing}. "
                f"Received: record={record!r}")
        fields = {key: value for key, value in record.items()
                  if key not in ("protocol", "routing_temperature")}
        # Records written before 0.2.0 name some models otherwise.
        if isinstance(record["model"], str):
            fields["model"] = current_model_name(record["model"],
                                                 record["reconstruction"])
        fields["validation"] = _validation_of(record["protocol"])
        fields.update(_temperature_fields(record.get("routing_temperature")))
        return cls(**fields)


def _schedule(initial, decay_rate, minimum):
    """The schedule, whose errors name the settings' fields."""
    try:
        return ExponentialTemperatureDecay(initial, decay_rate, minimum)
    except (TypeError, ValueError) as error:
        message = str(error)
        for schedule_name, field_name in _SCHEDULE_ARGUMENTS:
            message = message.replace(schedule_name, field_name)
        raise type(error)(message) from None


def _check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            "Received an invalid type for `seed`, expected an integer. "
            f"Received: seed={seed!r} of type {type(seed).__name__}")
    if not 0 <= seed <= _MAX_SEED:
        raise ValueError(
            "Received an invalid value for `seed`, expected an integer in "
            f"[0, {_MAX_SEED}]. Received: seed={seed!r}")
    return int(seed)


def _check_until_accuracy(target, validation):
    """The target accuracy as a float in (0, 1), or `None`."""
    if target is None:
        return None
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        raise TypeError(
            "Received an invalid type for `until_accuracy`, expected a "
            "number in (0, 1) or None. Received: "
            f"until_accuracy={target!r} of type {type(target).__name__}")
    if not 0 < target < 1:  # Also refuses NaN.
        raise ValueError(
            "Received an invalid value for `until_accuracy`, expected an "
            "accuracy strictly between 0 and 1 (e.g. 0.99). Received: "
            f"until_accuracy={target!r}")
    if validation == "test":
        raise ValueError(
            "`until_accuracy` stops training when the validation accuracy "
            "reaches the target, and with `validation='test'` that is the "
            "test set: its accuracy would be a stopping rule, at least the "
            "target by construction, not a measurement. Use "
            "validation='holdout' (the default). Received: "
            f"until_accuracy={target!r}, validation='test'")
    return float(target)


def _check_dataset_options(options):
    if options is None:
        return {}
    if not isinstance(options, dict) or not all(
            isinstance(key, str) for key in options):
        raise TypeError(
            "Received an invalid value for `dataset_options`, expected "
            "None or a dict of loader options by name. Received: "
            f"dataset_options={options!r}")
    return dict(options)


def _validation_of(protocol):
    """`"holdout"` for the holdout protocol's description, and so on."""
    for validation, description in PROTOCOLS.items():
        if protocol == description:
            return validation
    raise ValueError(
        f"Unknown `protocol`. Expected one of {list(PROTOCOLS.values())}. "
        f"Received: protocol={protocol!r}")


def _temperature_fields(schedule_config):
    """The temperature fields of a recorded schedule config (or none)."""
    if schedule_config is None:
        return {}
    if not isinstance(schedule_config, dict) or set(schedule_config) != {
            name for name, _ in _SCHEDULE_ARGUMENTS}:
        raise ValueError(
            "Expected `routing_temperature` to be a temperature schedule's "
            f"config, with the keys {[name for name, _ in _SCHEDULE_ARGUMENTS]}"
            f". Received: routing_temperature={schedule_config!r}")
    return {field_name: schedule_config[schedule_name]
            for schedule_name, field_name in _SCHEDULE_ARGUMENTS}
