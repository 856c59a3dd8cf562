"""NumPy reference of query-key-value attention routing.

Written from the equations of the routing (a single attention pass with
learned parent queries; later passes query from the previous parents),
with explicit loops over heads, children and parents:

    k_hi   = W_k[h]^T u_i (+ R[h, p(i)])
    q_hj   = Q[h, j] (first pass) or W_q[h]^T v_j (later passes)
    e_hij  = q_hj . k_hi / sqrt(d_k)
    c_hij  = softmax over j (or over i) of e_hij / tau
    val_ij = W_ij (a_i u_i)  or  W_v (a_i u_i)
    s_j    = concat_h sum_i c_hij val_ij[h-th slice]
    v_j    = squash(s_j)

Shapes: u (B, N, D_in) or a grid (B, H, W, C, D_in), activations a (B, N)
or (B, H, W, C), parent queries Q (h, M, d_k), key kernel (D_in, h, d_k),
query kernel (D_out, h, d_k), kernel (N, D_in, M, D_out) for votes or
(D_in, D_out) for a shared value, position table R (H, W, h, d_k).
"""

import numpy as np

from tests.layers.reference import squash


def _softmax(x):
    x = x - np.max(x)
    e = np.exp(x)
    return e / np.sum(e)


def attention_routing(u, parent_queries, key_kernel, kernel,
                      num_iterations=1, query_kernel=None, activations=None,
                      position_term=None, value_form="votes",
                      normalization="parents", temperature=1.0,
                      squash_variant="efficient"):
    """Returns `(parents per pass, couplings per pass)`.

    Couplings are `(B, h, N, M)`; parents `(B, M, D_out)`.
    """
    u = np.asarray(u, dtype="float64")
    grid_shape = None
    if u.ndim == 5:
        grid_shape = u.shape[1:4]
        u = u.reshape(u.shape[0], -1, u.shape[-1])
    batch, num_inputs, _ = u.shape
    num_heads, num_parents, key_dim = parent_queries.shape
    a = (np.ones((batch, num_inputs)) if activations is None
         else np.asarray(activations, dtype="float64").reshape(batch, -1))
    out_dim = kernel.shape[-1]
    head_dim = out_dim // num_heads

    def position(i):
        height, width, num_types = grid_shape
        row = i // (width * num_types)
        column = (i // num_types) % width
        return row, column

    all_parents, all_couplings = [], []
    parents = None
    for t in range(num_iterations):
        couplings = np.zeros((batch, num_heads, num_inputs, num_parents))
        new_parents = np.zeros((batch, num_parents, out_dim))
        for b in range(batch):
            scores = np.zeros((num_heads, num_inputs, num_parents))
            for h in range(num_heads):
                for i in range(num_inputs):
                    key = u[b, i] @ key_kernel[:, h, :]
                    if position_term is not None:
                        key = key + position_term[position(i)][h]
                    for j in range(num_parents):
                        if t == 0:
                            query = parent_queries[h, j]
                        else:
                            query = parents[b, j] @ query_kernel[:, h, :]
                        scores[h, i, j] = query @ key / np.sqrt(key_dim)
                if normalization == "parents":
                    for i in range(num_inputs):
                        couplings[b, h, i] = _softmax(
                            scores[h, i] / temperature)
                else:
                    for j in range(num_parents):
                        couplings[b, h, :, j] = _softmax(
                            scores[h, :, j] / temperature)
            for j in range(num_parents):
                s = np.zeros(out_dim)
                for i in range(num_inputs):
                    if value_form == "votes":
                        value = (a[b, i] * u[b, i]) @ kernel[i, :, j, :]
                    else:
                        value = (a[b, i] * u[b, i]) @ kernel
                    for h in range(num_heads):
                        piece = slice(h * head_dim, (h + 1) * head_dim)
                        s[piece] += couplings[b, h, i, j] * value[piece]
                new_parents[b, j] = squash(s, squash_variant)
        parents = new_parents
        all_parents.append(parents)
        all_couplings.append(couplings)
    return all_parents, all_couplings


def geometric_agreement(couplings, votes, parents):
    """`L_geo = sum_ij c_ij ||votes_ij - v_j||^2` per example.

    Heads route slices of the pose: head `h`'s couplings weigh the squared
    distance over its slice. couplings (B, h, N, M), votes (B, N, M, D),
    parents (B, M, D) -> (B,).
    """
    batch, num_heads, num_inputs, num_parents = couplings.shape
    head_dim = votes.shape[-1] // num_heads
    total = np.zeros(batch)
    for b in range(batch):
        for h in range(num_heads):
            piece = slice(h * head_dim, (h + 1) * head_dim)
            for i in range(num_inputs):
                for j in range(num_parents):
                    distance = votes[b, i, j, piece] - parents[b, j, piece]
                    total[b] += couplings[b, h, i, j] * np.sum(distance**2)
    return total
