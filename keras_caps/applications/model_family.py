"""`ModelFamily`: what the training recipe knows about a family of models."""

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping

from keras_caps.applications import presets as presets_lib


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """A builder and its per-dataset presets, as data.

    Everything `keras-caps train` needs about a family is here or in its
    presets, so the training recipe has no per-family branches. Each preset
    (a dict per dataset) holds at least `batch_size`, `epochs`,
    `learning_rate_schedule` and the keys that schedule reads (see
    `keras_caps.applications.presets`), and `input_scaling`
    (`"standardize"` makes the recipe compute the training images'
    statistics and pass them as `input_statistics=`); optionally
    `dataset_options`, the options its recipe passes to
    `keras_caps.datasets.load` (e.g. CapsNet's shift augmentation).

    Attributes:
        name: str. The builder's name, for error messages.
        builder: Callable. `builder(dataset, **options)` returns a compiled
            model; it takes `reconstruction=` when `has_decoder`, and
            `input_statistics=` when a preset standardises its input.
        presets: Mapping from dataset name to preset dict.
        has_decoder: bool. Whether the models can train with a
            reconstruction decoder (then the default). Defaults to `True`.
        requires_decoder: bool. Whether the decoder is part of what the
            model is (the CNN ladder's step that adds it): training it
            without is refused. Defaults to `False`.
        recipe_callbacks: Callable or `None`. `recipe_callbacks(dataset,
            epochs)` returns the callbacks `keras-caps train` adds for the
            family (e.g. `MatrixCapsNet`'s spread-loss margin schedule),
            placed before the logs. Defaults to `None`.

    Example:

    >>> family = keras_caps.applications.EFFICIENT_CAPSNET
    >>> family.get_preset("mnist")["batch_size"]
    16
    >>> model = family.build("mnist", reconstruction=False)
    >>> model.output_shape
    (None, 10)
    """

    name: str
    builder: Callable
    presets: Mapping
    has_decoder: bool = True
    requires_decoder: bool = False
    recipe_callbacks: Callable | None = None

    def __post_init__(self):
        if self.requires_decoder and not self.has_decoder:
            raise ValueError(
                f"{self.name}: `requires_decoder=True` needs "
                "`has_decoder=True`. Received: has_decoder=False")

    def get_preset(self, dataset):
        """The preset of `dataset`; a clear `ValueError` for unknown ones."""
        return presets_lib.lookup_preset(self.presets, dataset, self.name)

    def learning_rate_schedule(self, dataset):
        """`schedule(epoch) -> learning_rate` of the preset, or `None`."""
        return presets_lib.learning_rate_schedule(self.get_preset(dataset))

    def dataset_options(self, dataset):
        """The loader options of the preset's recipe (often none)."""
        return dict(self.get_preset(dataset).get("dataset_options", {}))

    def standardizes_input(self, dataset):
        """Whether the models need the training images' statistics."""
        return self.get_preset(dataset)["input_scaling"] == "standardize"

    def resolve_reconstruction(self, reconstruction):
        """Whether to train with the decoder: `None` means `has_decoder`.

        Raises a `ValueError` for `True` on a family without a decoder,
        and for `False` on one that `requires_decoder`.
        """
        if reconstruction is None:
            return self.has_decoder
        if reconstruction and not self.has_decoder:
            raise ValueError(
                f"{self.name} has no reconstruction decoder: train it "
                "with reconstruction=False (--no-reconstruction). "
                "Received: reconstruction=True")
        if not reconstruction and self.requires_decoder:
            raise ValueError(
                f"{self.name} is defined by its reconstruction decoder: "
                "train it with reconstruction=True (the default). "
                "Received: reconstruction=False")
        return reconstruction

    @property
    def fixed_reconstruction(self):
        """`True` or `False` when the family decides whether its models
        train with the decoder (none, or one they require), else `None`:
        the run decides."""
        if not self.has_decoder:
            return False
        return True if self.requires_decoder else None

    def build(self, dataset, *, reconstruction=None, input_statistics=None,
              **options):
        """The family's model for `dataset`.

        Args:
            dataset: str. A key of `presets`.
            reconstruction: bool or `None`. Train with the decoder;
                `None` is `has_decoder`. `True` for a family without a
                decoder raises a `ValueError`.
            input_statistics: `(mean, variance)` for presets that
                standardise their input.
            **options: Other builder arguments.
        """
        reconstruction = self.resolve_reconstruction(reconstruction)
        if self.has_decoder:
            options["reconstruction"] = reconstruction
        if input_statistics is not None:
            options["input_statistics"] = input_statistics
        return self.builder(dataset, **options)
