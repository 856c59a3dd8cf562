"""Shared helpers of the inverted attention routing and stack tests."""

import keras

from keras_caps.layers import InvertedAttentionRouting
from keras_caps.layers import InvertedAttentionRoutingStack
from tests.layers import inverted_attention_reference as reference


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def serialized(*layers):
    return [keras.saving.serialize_keras_object(layer) for layer in layers]


def hand_set(layer, rng, scale=0.8):
    """Sets the layer's kernel and LayerNorm by hand; returns its reference.

    The kernel is large enough for routing to change the couplings, and
    the LayerNorm gain and bias are not the identity.
    """
    kernel = (rng.normal(size=tuple(layer.kernel.shape)) * scale).astype(
        "float32")
    layer.kernel.assign(kernel)
    gamma = beta = None
    if layer.layer_norm is not None:
        gamma = (1.0 + 0.3 * rng.normal(size=layer.capsule_dim)).astype(
            "float32")
        beta = (0.2 * rng.normal(size=layer.capsule_dim)).astype("float32")
        layer.layer_norm.gamma.assign(gamma)
        layer.layer_norm.beta.assign(beta)
        gamma, beta = gamma.astype("float64"), beta.astype("float64")
    strides = None if layer.kernel_size is None else layer.strides[0]
    return reference.Layer(kernel.astype("float64"), layer.pose, strides,
                           gamma, beta, layer.epsilon)


def three_layer_stack(pose="matrix", **kwargs):
    """conv 3x3 s2 -> conv 2x2 s1 -> FC, on a (7, 6) map of 2 types."""
    if pose == "matrix":
        dims = (4, 4, 4)
    else:
        dims = (4, 2, 5)
    layers = [
        InvertedAttentionRouting(3, dims[0], kernel_size=3, strides=2,
                                 pose=pose),
        InvertedAttentionRouting(2, dims[1], kernel_size=2, pose=pose),
        InvertedAttentionRouting(3, dims[2], pose=pose),
    ]
    return InvertedAttentionRoutingStack(layers, **kwargs)
