"""NumPy references of Efficient-CapsNet's layers (Mazzia et al., 2021,
Section 3, Eqs. 1-6, and the official `utils/layers.py`)."""

import numpy as np


def squash(s, variant="efficient"):
    norm = np.sqrt(np.sum(s**2, axis=-1, keepdims=True))
    if variant == "efficient":
        return (1.0 - np.exp(-norm)) * s / norm
    return norm**2 / (1.0 + norm**2) * s / norm


def primary_caps(x, kernel, bias, strides, num_capsules, capsule_dim,
                 variant="efficient"):
    """PrimaryCaps: depthwise valid convolution, row-major reshape, squash."""
    batch, height, width, channels = x.shape
    kh, kw = kernel.shape[:2]
    out_h = (height - kh) // strides + 1
    out_w = (width - kw) // strides + 1
    features = np.zeros((batch, out_h, out_w, channels))
    for h in range(out_h):
        for w in range(out_w):
            window = x[:, h * strides:h * strides + kh,
                       w * strides:w * strides + kw, :]
            features[:, h, w, :] = np.sum(window * kernel, axis=(1, 2)) + bias
    return squash(features.reshape(batch, num_capsules, capsule_dim),
                  variant)


def fc_caps(u, kernel, prior, scale_dim):
    """FCCaps self-attention routing (Eqs. 2-6), with explicit loops over
    output capsules."""
    batch, num_inputs, _ = u.shape
    num_outputs = kernel.shape[0]
    outputs = []
    couplings = np.zeros((batch, num_outputs, num_inputs))
    votes = np.zeros((batch, num_outputs, num_inputs, kernel.shape[-1]))
    for j in range(num_outputs):
        for i in range(num_inputs):
            votes[:, j, i] = u[:, i] @ kernel[j, i]
    for b in range(batch):
        for j in range(num_outputs):
            attention = votes[b, j] @ votes[b, j].T  # (N_in, N_in)
            couplings[b, j] = attention.sum(axis=1) / np.sqrt(scale_dim)
    couplings = np.exp(couplings - couplings.max(axis=1, keepdims=True))
    couplings /= couplings.sum(axis=1, keepdims=True)
    weights = couplings + prior[None, :, :, 0]
    outputs = np.einsum("bji,bjiz->bjz", weights, votes)
    return squash(outputs), couplings
