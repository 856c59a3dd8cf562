"""NumPy reference of Heinsen's vector routing (Heinsen, 2022, Algorithm 1).

Written from the paper's algorithm with explicit loops and an explicit vote
tensor, one example at a time, in float64. Masks follow the layer's documented
decisions: padded inputs are removed from the sequence before routing (so `m`
counts present inputs), disallowed pairs get `g = 0`, the first E-step is
uniform over each input's allowed outputs, and an input with no allowed output
gets `R = 0` (where the original reference would return NaN).
"""

import numpy as np

LAYER_NORM_EPSILON = 1e-5


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def layer_norm(x):
    """LayerNorm over the last axis without affine; identity for size 1."""
    if x.shape[-1] == 1:
        return x
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + LAYER_NORM_EPSILON)


def vector_routing(x, weights, num_iterations, normalize=True,
                   routing_mask=None, present=None, temperature=1.0):
    """Routes one example `x` of shape (n, d_in).

    Args:
        x: array (n, d_in).
        weights: dict with the paper's names: `W_A` (n or 1, d_in), `B_A`
            (n or 1,), `W_F1` (n_out, d_in), `W_F2` (d_in, d_out), `B_F2`
            (n_out, d_out), `W_G1` (d_out, d_in), `W_G2`, `B_G2`
            (n_out, d_in), `W_S`, `B_S` (n or 1, n_out), and either
            `beta_use`, `beta_ign` (n, n_out) for a fixed length or
            `beta_use_kernel`, `beta_ign_kernel` (d_in, n_out) with
            `beta_use_bias`, `beta_ign_bias` (n_out,) for a variable length.
        num_iterations: int.
        normalize: bool.
        routing_mask: bool array (n, n_out), True where i may route to j.
        present: bool array (n,), False for padding.
        temperature: the E-step is `softmax_j(S / temperature)` over the
            allowed outputs; `np.inf` gives its limit (uniform shares) and
            `0.0` its other limit (all of the share to the best output).

    Returns:
        dict with `x_out` (n_out, d_out) and, for all n inputs (zero rows for
        padding), `phi`, `D_use`, `D_ign`, `g` and the last E-step's shares
        `R` (n, n_out).
    """
    x = np.asarray(x, dtype="float64")
    weights = {k: np.asarray(v, dtype="float64") for k, v in weights.items()}
    n, _ = x.shape
    n_out = weights["W_F1"].shape[0]
    fixed = "beta_use" in weights
    present = np.ones(n, bool) if present is None else np.asarray(present)
    if routing_mask is None:
        routing_mask = np.ones((n, n_out), bool)
    keep = np.flatnonzero(present)
    m = len(keep)

    def per_input(name):
        # Per-position weights for a fixed length, one shared row otherwise.
        value = weights[name]
        return value[keep] if fixed else np.repeat(value[:1], m, axis=0)

    xs = x[keep]
    allowed = np.asarray(routing_mask)[keep]
    W_A, B_A = per_input("W_A"), per_input("B_A")
    W_S, B_S = per_input("W_S"), per_input("B_S")
    if fixed:
        beta_use, beta_ign = per_input("beta_use"), per_input("beta_ign")
    else:
        beta_use = xs @ weights["beta_use_kernel"] + weights["beta_use_bias"]
        beta_ign = xs @ weights["beta_ign_kernel"] + weights["beta_ign_bias"]
    W_F1, W_F2, B_F2 = weights["W_F1"], weights["W_F2"], weights["B_F2"]
    W_G1, W_G2, B_G2 = weights["W_G1"], weights["W_G2"], weights["B_G2"]
    d_out = W_F2.shape[1]

    scaled = xs / np.sqrt(max(m, 1))
    # A: one score per input.
    a = np.array([np.dot(scaled[i], W_A[i]) + B_A[i] for i in range(m)])
    # F: the vote tensor V (m, n_out, d_out).
    V = np.zeros((m, n_out, d_out))
    for i in range(m):
        for j in range(n_out):
            V[i, j] = (scaled[i] * W_F1[j]) @ W_F2 + B_F2[j]
    g = np.where(allowed, sigmoid(a)[:, None], 0.0)

    x_out = None
    for t in range(num_iterations):
        R = np.zeros((m, n_out))
        if t == 0:
            for i in range(m):
                count = allowed[i].sum()
                if count:
                    R[i] = allowed[i] / count
        else:
            # G: each output predicts the inputs; S: log-similarities.
            pred = (layer_norm(x_out) @ W_G1) * W_G2 + B_G2  # (n_out, d_in)
            S = np.zeros((m, n_out))
            for i in range(m):
                for j in range(n_out):
                    S[i, j] = log_sigmoid(
                        np.dot(xs[i], pred[j]) * W_S[i, j] + B_S[i, j])
            for i in range(m):
                if allowed[i].any():
                    R[i] = tempered_softmax(S[i], allowed[i], temperature)
        D_use = g * R
        D_ign = g - D_use
        phi = beta_use * D_use - beta_ign * D_ign
        x_out = np.zeros((n_out, d_out))
        for j in range(n_out):
            for i in range(m):
                x_out[j] += phi[i, j] * V[i, j]
    if normalize:
        x_out = layer_norm(x_out)

    def scatter(values):
        full = np.zeros((n, n_out))
        full[keep] = values
        return full

    return {"x_out": x_out, "phi": scatter(phi), "D_use": scatter(D_use),
            "D_ign": scatter(D_ign), "g": scatter(g), "R": scatter(R)}


def tempered_softmax(logits, allowed, temperature):
    """softmax(logits / temperature) over the allowed entries of a row."""
    if temperature == np.inf:
        return allowed / allowed.sum()
    if temperature == 0.0:
        logits = np.where(allowed, logits, -np.inf)
        top = logits == logits.max()  # ties share
        return top / top.sum()
    logits = np.where(allowed, logits / temperature, -np.inf)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def compose_credit_assignments(phis, epsilon=1e-5):
    """Appendix A chain of products, with a per-example std."""
    product = None
    for phi in phis:
        phi = np.asarray(phi, dtype="float64")
        product = phi if product is None else product @ phi
        std = product.std(axis=(-2, -1), keepdims=True)
        product = product / (std + epsilon)
    return product
