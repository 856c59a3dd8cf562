"""NumPy references for dynamic routing (Sabour et al., 2017, Procedure 1).

Shapes: inputs u (B, I, D_in), kernel W (I, D_in, J, D_out),
votes (B, I, J, D_out), logits and couplings (B, I, J).
"""

import numpy as np

from tests.layers.reference import squash


def dynamic_routing(u, kernel, num_iterations, bias=None, leaky=False,
                    couplings=None, temperature=1.0, attention=None,
                    attention_kernel=None, attention_bias=0.0,
                    attention_weight=0.0):
    """Procedure 1, with explicit loops over children and parents.

    With `attention`, the agreement + attention hybrid: the couplings are
    `softmax_j((b_ij + lambda * a_ij) / temperature)` with
    `bilinear: a_ij = u_i^T W_a votes_ij / sqrt(D_in)` or
    `concat: a_ij = LeakyReLU_0.2(w_a^T [votes_ij; v_j] + b_a)`, `v_j` the
    previous iteration's outputs (0 before the first).

    Args:
        u: (B, I, D_in) inputs.
        kernel: (I, D_in, J, D_out) vote matrices.
        num_iterations: routing iterations r.
        bias: optional (J, D_out) bias added before every squash.
        leaky: leaky routing (softmax over J + 1, leak column dropped).
        couplings: optional (B, I, J) couplings held constant: skips the
            routing loop and returns `squash(sum_i c * votes + bias)`.
        temperature: divides the logits (the leak logit stays 0).
        attention: None, "bilinear" or "concat".
        attention_kernel: W_a (D_in, D_out) or w_a (2 D_out,).
        attention_bias: b_a (concat).
        attention_weight: lambda.

    Returns:
        `(outputs (B, J, D_out), couplings of the last iteration (B, I, J))`.
    """
    batch, num_inputs, _ = u.shape
    num_outputs = kernel.shape[2]
    votes = np.zeros((batch, num_inputs, num_outputs, kernel.shape[3]))
    for i in range(num_inputs):
        for j in range(num_outputs):
            votes[:, i, j] = u[:, i] @ kernel[i, :, j, :]
    if couplings is not None:
        return _weighted_squash(couplings, votes, bias), couplings
    logits = np.zeros((batch, num_inputs, num_outputs))
    outputs = np.zeros((batch, num_outputs, kernel.shape[3]))
    for t in range(num_iterations):
        scores = np.zeros_like(logits)
        if attention is not None:
            for i in range(num_inputs):
                for j in range(num_outputs):
                    scores[:, i, j] = _attention_score(
                        attention, u[:, i], votes[:, i, j], outputs[:, j],
                        attention_kernel, attention_bias)
        couplings = _softmax_over_parents(
            logits + attention_weight * scores, leaky, temperature)
        outputs = _weighted_squash(couplings, votes, bias)
        if t < num_iterations - 1:
            for j in range(num_outputs):
                logits[:, :, j] += np.sum(
                    votes[:, :, j] * outputs[:, None, j], axis=-1)
    return outputs, couplings


def _attention_score(attention, child, vote, output, attention_kernel,
                     attention_bias):
    """a_ij for a batch: child (B, D_in), vote and output (B, D_out)."""
    if attention == "bilinear":
        return np.einsum("bd,dz,bz->b", child, attention_kernel,
                         vote) / np.sqrt(child.shape[-1])
    if attention == "concat":
        score = np.concatenate([vote, output], axis=-1) @ attention_kernel
        score = score + attention_bias
        return np.where(score > 0, score, 0.2 * score)
    raise ValueError(f"unknown attention {attention!r}")


def _softmax_over_parents(logits, leaky, temperature=1.0):
    """softmax(logits / temperature) over the parents (last axis); `np.inf`
    and `0.0` give the limits (uniform, one-hot at the maximum, shared
    between tied maxima)."""
    if leaky:
        leak = np.zeros(logits.shape[:-1] + (1,))
        logits = np.concatenate([leak, logits], axis=-1)
    if temperature == np.inf:
        couplings = np.full(logits.shape, 1.0 / logits.shape[-1])
    elif temperature == 0.0:
        top = logits == logits.max(axis=-1, keepdims=True)  # ties share
        couplings = top / top.sum(axis=-1, keepdims=True)
    else:
        logits = logits / temperature
        exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
        couplings = exp / exp.sum(axis=-1, keepdims=True)
    return couplings[..., 1:] if leaky else couplings


def _weighted_squash(couplings, votes, bias):
    weighted = np.sum(couplings[..., None] * votes, axis=1)  # (B, J, D_out)
    if bias is not None:
        weighted = weighted + bias
    return squash(weighted, variant="sabour")


def numerical_gradient(fn, x, step=1e-6):
    """Central differences of the scalar `fn` at every entry of `x`."""
    x = np.array(x, dtype="float64")
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + step
        upper = fn(x)
        x[index] = original - step
        lower = fn(x)
        x[index] = original
        gradient[index] = (upper - lower) / (2 * step)
    return gradient


def conv_primary_caps(x, kernel, bias, strides, scale, type_major):
    """Valid convolution, scale, per-type bias, capsule order, squash."""
    batch, height, width, _ = x.shape
    kh, kw, _, channels = kernel.shape
    num_types, capsule_dim = bias.shape
    out_h = (height - kh) // strides + 1
    out_w = (width - kw) // strides + 1
    features = np.zeros((batch, out_h, out_w, channels))
    for h in range(out_h):
        for w in range(out_w):
            window = x[:, h * strides:h * strides + kh,
                       w * strides:w * strides + kw, :]
            features[:, h, w, :] = np.einsum("bpqc,pqcf->bf", window, kernel)
    capsules = scale * features.reshape(batch, out_h, out_w, num_types,
                                        capsule_dim) + bias
    if type_major:
        capsules = capsules.transpose(0, 3, 1, 2, 4)
    return squash(capsules.reshape(batch, -1, capsule_dim), variant="sabour")
