"""Capsule-network applications: builders of compiled Keras models."""

from keras_caps.applications.batch_norm_folding import fold_batch_normalization
from keras_caps.applications.capsnet import CapsNet
from keras_caps.applications.credit_model import credit_model
from keras_caps.applications.efficient_capsnet import EfficientCapsNet
from keras_caps.applications.efficient_capsnet_presets import (
    EFFICIENT_CAPSNET_PRESETS,
)
from keras_caps.applications.inference_model import inference_model
from keras_caps.applications.inverted_attention_capsnet import (
    InvertedAttentionCapsNet,
)
from keras_caps.applications.serving_model import SERVING_PRECISIONS
from keras_caps.applications.serving_model import serving_model
from keras_caps.applications.vector_routing_capsnet import VectorRoutingCapsNet
from keras_caps.applications.vector_routing_capsnet_presets import (
    VECTOR_ROUTING_CAPSNET_PRESETS,
)
from keras_caps.applications.vector_routing_head import VectorRoutingHead
