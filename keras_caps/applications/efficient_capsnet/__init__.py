"""Efficient-CapsNet (Mazzia et al., 2021): builder, presets and family."""

from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    EFFICIENT_CAPSNET,
)
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    EfficientCapsNet,
)
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    get_preset,
)
from keras_caps.applications.efficient_capsnet.efficient_capsnet import (
    learning_rate_schedule,
)
from keras_caps.applications.efficient_capsnet.efficient_capsnet_presets import (  # noqa: E501
    EFFICIENT_CAPSNET_PRESETS,
)
