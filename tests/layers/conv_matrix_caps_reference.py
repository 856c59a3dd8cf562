"""NumPy reference of convolutional EM routing, from Procedure 1.

Hinton, Sabour & Frosst, "Matrix capsules with EM routing" (ICLR 2018),
Section 3 (convolutional capsules: one 4x4 transform per kernel offset,
child type and parent type) and Procedure 1, in float64 with plain loops:
every parent at every output position is fed only by the children of its
window, and the E-step normalises each child's assignments over every
parent that reaches it, at every output position and of every type
(Gritzman, arXiv 1907.00652, the third pitfall), by an explicit loop over
the children and, for each, over the parents whose window holds it.
"""

import math

import numpy as np


def windows_of(height, width, kernel_size, strides):
    """Each output position's window: `{(y, x): [(n, row, column, t)...]}`.

    `n` counts the window's children row-major over (kernel row, kernel
    column) and then the child type, added by the caller.
    """
    (kernel_h, kernel_w), (stride_h, stride_w) = kernel_size, strides
    out_h = (height - kernel_h) // stride_h + 1
    out_w = (width - kernel_w) // stride_w + 1
    return out_h, out_w, {
        (y, x): [(p, q, y * stride_h + p, x * stride_w + q)
                 for p in range(kernel_h) for q in range(kernel_w)]
        for y in range(out_h) for x in range(out_w)}


def conv_em_routing(capsules, kernel, beta_u, beta_a, strides,
                    inverse_temperatures, epsilon, temperature=1.0):
    """Routes one batch of matrix capsules `(batch, H, W, B, 17)`.

    Args:
        kernel: `(K_h, K_w, B, C, 4, 4)`, the transform of each (kernel
            offset, child type, parent type).
        beta_u, beta_a: `(C,)`.

    Returns:
        `(outputs (batch, H', W', C, 17), couplings)`, the couplings a list
        with the `R` of every M-step, each `(batch, 1, H' * W' * K_h * K_w
        * B, C)` (rows: output position, kernel row, kernel column, child
        type, row-major).
    """
    batch, height, width, num_types, _ = capsules.shape
    kernel_h, kernel_w, _, num_parents = kernel.shape[:4]
    out_h, out_w, windows = windows_of(height, width, (kernel_h, kernel_w),
                                       strides)
    outputs = np.zeros((batch, out_h, out_w, num_parents, 17))
    rows = out_h * out_w * kernel_h * kernel_w * num_types
    couplings = [np.zeros((batch, 1, rows, num_parents))
                 for _ in inverse_temperatures]
    for b in range(batch):
        example = _route_example(
            capsules[b].astype("float64"), kernel.astype("float64"),
            beta_u, beta_a, windows, num_types, inverse_temperatures,
            epsilon, temperature)
        for (y, x, c), (mean, activation) in example["parents"].items():
            outputs[b, y, x, c, :16] = mean
            outputs[b, y, x, c, 16] = activation
        for t, assignments in enumerate(example["couplings"]):
            for (y, x, n, c), value in assignments.items():
                row = (y * out_w + x) * kernel_h * kernel_w * num_types + n
                couplings[t][b, 0, row, c] = value
    return outputs, couplings


def _edges(capsules, kernel, windows, num_types):
    """Every (parent position, window child, parent type) edge's vote.

    Returns `{(y, x, n, c): (child, vote)}` with `child = (row, column, t)`.
    """
    num_parents = kernel.shape[3]
    edges = {}
    for (y, x), offsets in windows.items():
        for p, q, row, column in offsets:
            for t in range(num_types):
                n = (p * kernel.shape[1] + q) * num_types + t
                pose = capsules[row, column, t, :16].reshape(4, 4)
                for c in range(num_parents):
                    vote = (pose @ kernel[p, q, t, c]).reshape(16)
                    edges[y, x, n, c] = ((row, column, t), vote)
    return edges


def _route_example(capsules, kernel, beta_u, beta_a, windows, num_types,
                   inverse_temperatures, epsilon, temperature):
    edges = _edges(capsules, kernel, windows, num_types)
    activation = {}
    for (row, column, t) in {child for child, _ in edges.values()}:
        activation[row, column, t] = min(max(capsules[row, column, t, 16],
                                             0.0), 1.0)
    reached = {}  # child -> the edges (parents) that reach it
    for edge, (child, _) in edges.items():
        reached.setdefault(child, []).append(edge)
    # Uniform start: R_ij = 1 / (number of parents child i reaches).
    assignments = {edge: 1.0 / len(reached[child])
                   for edge, (child, _) in edges.items()}
    history = []
    for step, inverse_temperature in enumerate(inverse_temperatures):
        history.append(dict(assignments))
        parents = _m_step(edges, assignments, activation, beta_u, beta_a,
                          inverse_temperature, epsilon)
        if step + 1 < len(inverse_temperatures):
            assignments = _e_step(edges, reached, parents, temperature)
    return {"parents": {parent: (mean, a) for parent, (mean, _, a)
                        in parents.items()},
            "couplings": history}


# A parent that receives no more data than this (all its children off)
# gets mean 0 and variance epsilon instead of 0 / 0 (as
# `keras_caps.ops.em_m_step` does); Procedure 1 as written otherwise.
NO_DATA = 1e-20


def _m_step(edges, assignments, activation, beta_u, beta_a,
            inverse_temperature, epsilon):
    """Per parent `(y, x, c)`: mean, variance and activation."""
    fed = {}
    for (y, x, n, c), (child, vote) in edges.items():
        weight = assignments[y, x, n, c] * activation[child]
        fed.setdefault((y, x, c), []).append((weight, vote))
    parents = {}
    for (y, x, c), data in fed.items():
        amount = sum(weight for weight, _ in data)
        divisor = amount if amount > NO_DATA else 1.0
        mean = sum(weight * vote for weight, vote in data) / divisor
        variance = sum(weight * (vote - mean) ** 2
                       for weight, vote in data) / divisor + epsilon
        cost = np.sum(beta_u[c] + 0.5 * np.log(variance)) * amount
        a = 1.0 / (1.0 + math.exp(-inverse_temperature * (beta_a[c] - cost)))
        parents[y, x, c] = (mean, variance, a)
    return parents


def _e_step(edges, reached, parents, temperature):
    """R_ij = a_j p_ij / sum over every parent k reaching i of a_k p_ik."""
    assignments = {}
    for child_edges in reached.values():
        logits = []
        for (y, x, n, c) in child_edges:
            mean, variance, a = parents[y, x, c]
            vote = edges[y, x, n, c][1]
            log_p = -0.5 * np.sum(np.log(2.0 * math.pi * variance)
                                  + (vote - mean) ** 2 / variance)
            logits.append((math.log(a) + log_p) / temperature)
        logits = np.array(logits)
        weights = np.exp(logits - logits.max())
        for edge, weight in zip(child_edges, weights / weights.sum()):
            assignments[edge] = weight
    return assignments
