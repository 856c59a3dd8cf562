"""NumPy references of Efficient-CapsNet's layers (Mazzia et al., 2021,
Section 3, Eqs. 1-6, and the official `utils/layers.py`)."""

import numpy as np


def squash(s, variant="efficient"):
    norm = np.sqrt(np.sum(s**2, axis=-1, keepdims=True))
    safe_norm = np.where(norm > 0.0, norm, 1.0)  # squash(0) = 0
    if variant == "efficient":
        return (1.0 - np.exp(-norm)) * s / safe_norm
    return norm**2 / (1.0 + norm**2) * s / safe_norm


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


def fc_caps(u, kernel, prior, scale_dim, temperature=1.0):
    """FCCaps self-attention routing (Eqs. 2-6), with explicit loops over
    output capsules; the couplings are `softmax_j(agreement / temperature)`,
    with `np.inf` and `0.0` giving the limits (uniform, one-hot)."""
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
    if temperature == np.inf:
        couplings = np.full(couplings.shape, 1.0 / num_outputs)
    elif temperature == 0.0:
        top = couplings == couplings.max(axis=1, keepdims=True)
        couplings = top / top.sum(axis=1, keepdims=True)  # ties share
    else:
        couplings = couplings / temperature
        couplings = np.exp(couplings - couplings.max(axis=1, keepdims=True))
        couplings /= couplings.sum(axis=1, keepdims=True)
    weights = couplings + prior[None, :, :, 0]
    outputs = np.einsum("bji,bjiz->bjz", weights, votes)
    return squash(outputs), couplings
