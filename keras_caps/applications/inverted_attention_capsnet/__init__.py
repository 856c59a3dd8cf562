"""Inverted dot-product attention routing (Tsai et al., 2020) on CIFAR."""

from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet import (  # noqa: E501
    INVERTED_ATTENTION_CAPSNET,
)
from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet import (  # noqa: E501
    InvertedAttentionCapsNet,
)
from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet import (  # noqa: E501
    get_preset,
)
from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet import (  # noqa: E501
    learning_rate_schedule,
)
from keras_caps.applications.inverted_attention_capsnet.inverted_attention_capsnet_presets import (  # noqa: E501
    INVERTED_ATTENTION_CAPSNET_PRESETS,
)
