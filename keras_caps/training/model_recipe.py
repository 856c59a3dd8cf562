"""The models the training recipe knows, with their per-dataset settings."""

import dataclasses
from collections.abc import Callable

from keras_caps.applications import capsnet
from keras_caps.applications import efficient_capsnet
from keras_caps.applications import inverted_attention_capsnet
from keras_caps.applications import vector_routing_capsnet


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """What `keras-caps train` needs to know about one application.

    Attributes:
        builder: The application builder, called as
            `builder(dataset, reconstruction=..., **extra)`; it must accept
            `input_statistics=` when a preset standardises its input.
        get_preset: `get_preset(dataset)` returns the preset dict, with at
            least `batch_size`, `epochs` and `input_scaling` keys; it raises
            a clear `ValueError` for datasets the model has no preset for.
        learning_rate_schedule: `learning_rate_schedule(dataset)` returns
            `schedule(epoch) -> learning_rate`, or `None` for a constant
            learning rate.
        dataset_options: `dataset_options(dataset)` returns the options
            the model's recipe passes to `keras_caps.datasets.load` (e.g.
            CapsNet's shift augmentation); the options a user passes win.
            `None` (default) keeps the loaders' defaults.
        has_decoder: bool. Whether the model can train with a
            reconstruction decoder; it is then the default. Defaults to
            `True`.
    """

    builder: Callable
    get_preset: Callable
    learning_rate_schedule: Callable
    dataset_options: Callable | None = None
    has_decoder: bool = True


MODELS = {
    "efficient_capsnet": ModelRecipe(
        builder=efficient_capsnet.EfficientCapsNet,
        get_preset=efficient_capsnet.get_preset,
        learning_rate_schedule=efficient_capsnet.learning_rate_schedule,
    ),
    "vector_routing_capsnet": ModelRecipe(
        builder=vector_routing_capsnet.VectorRoutingCapsNet,
        get_preset=vector_routing_capsnet.get_preset,
        learning_rate_schedule=vector_routing_capsnet.learning_rate_schedule,
        has_decoder=False,
    ),
    "capsnet": ModelRecipe(
        builder=capsnet.CapsNet,
        get_preset=capsnet.get_preset,
        learning_rate_schedule=capsnet.learning_rate_schedule,
        dataset_options=capsnet.dataset_options,
    ),
    "inverted_attention_capsnet": ModelRecipe(
        builder=inverted_attention_capsnet.InvertedAttentionCapsNet,
        get_preset=inverted_attention_capsnet.get_preset,
        learning_rate_schedule=(
            inverted_attention_capsnet.learning_rate_schedule),
        has_decoder=False,
    ),
}
