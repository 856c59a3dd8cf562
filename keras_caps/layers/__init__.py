"""Capsule layers."""

from keras_caps.layers.attention_routing import AttentionRouting
from keras_caps.layers.conv_matrix_caps import ConvMatrixCaps
from keras_caps.layers.conv_primary_caps import ConvPrimaryCaps
from keras_caps.layers.conv_self_routing import ConvSelfRouting
from keras_caps.layers.dynamic_routing import DynamicRouting
from keras_caps.layers.em_routing import EMRouting
from keras_caps.layers.fc_caps import FCCaps
from keras_caps.layers.hybrid_routing import HybridRouting
from keras_caps.layers.inverted_attention_routing import (
    InvertedAttentionRouting,
)
from keras_caps.layers.inverted_attention_routing_stack import (
    InvertedAttentionRoutingStack,
)
from keras_caps.layers.length import Length
from keras_caps.layers.mask import Mask
from keras_caps.layers.primary_caps import PrimaryCaps
from keras_caps.layers.primary_matrix_caps import PrimaryMatrixCaps
from keras_caps.layers.router import Router
from keras_caps.layers.routing_pass import RoutingPasses
from keras_caps.layers.self_routing import SelfRouting
from keras_caps.layers.squash import Squash
from keras_caps.layers.vector_routing import VectorRouting
