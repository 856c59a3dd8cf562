"""NumPy reference for EM routing (Hinton, Sabour & Frosst, ICLR 2018).

Procedure 1 as written, with plain loops over children, parents and pose
entries, in float64: densities are computed as densities (no log domain),
so the inputs of the checks keep them in range. Matrix-capsule votes
`V_ij = M_i W_ij` and coordinate addition (§3) are written out too.

Shapes: votes (N, M, P), child activations (N,), beta_u and beta_a (M,).
"""

import math

import numpy as np


def m_step(votes, weights, beta_u, beta_a, inverse_temperature, epsilon,
           data_scale=1.0):
    """One M-step: `(means (M, P), variances (M, P), activations (M,))`."""
    num_children, num_parents, pose_size = votes.shape
    means = np.zeros((num_parents, pose_size))
    variances = np.zeros((num_parents, pose_size))
    activations = np.zeros(num_parents)
    for j in range(num_parents):
        amount = sum(weights[i, j] for i in range(num_children))
        total_cost = 0.0
        for h in range(pose_size):
            weighted = sum(weights[i, j] * votes[i, j, h]
                           for i in range(num_children))
            means[j, h] = weighted / amount if amount > 0 else 0.0
            spread = sum(weights[i, j] * (votes[i, j, h] - means[j, h]) ** 2
                         for i in range(num_children))
            variances[j, h] = (spread / amount if amount > 0 else 0.0
                               ) + epsilon
            sigma = math.sqrt(variances[j, h])
            total_cost += (beta_u[j] + math.log(sigma)) * amount * data_scale
        activations[j] = 1.0 / (1.0 + math.exp(
            -inverse_temperature * (beta_a[j] - total_cost)))
    return means, variances, activations


def gaussian_density(votes, means, variances):
    """`p_ij = prod_h N(V_ijh; mu_jh, sigma2_jh)`, `(N, M)`."""
    num_children, num_parents, pose_size = votes.shape
    density = np.ones((num_children, num_parents))
    for i in range(num_children):
        for j in range(num_parents):
            for h in range(pose_size):
                var = variances[j, h]
                density[i, j] *= math.exp(
                    -(votes[i, j, h] - means[j, h]) ** 2 / (2 * var)
                ) / math.sqrt(2 * math.pi * var)
    return density


def em_routing(votes, activations, beta_u, beta_a, inverse_temperatures,
               epsilon, temperature=1.0, data_scale=1.0):
    """Procedure 1: a list with one dict per iteration.

    Each dict holds `"couplings"` (the R the iteration's M-step used),
    `"means"`, `"variances"` and `"activations"` (its M-step's results).
    With `temperature` T the E-step is `R_ij = (a_j p_ij)^(1/T) / sum_k
    (a_k p_ik)^(1/T)` (T = 1: the paper's).
    """
    num_children, num_parents, _ = votes.shape
    couplings = np.full((num_children, num_parents), 1.0 / num_parents)
    passes = []
    for t, inverse_temperature in enumerate(inverse_temperatures):
        weights = couplings * activations[:, None]
        means, variances, parent_activations = m_step(
            votes, weights, beta_u, beta_a, inverse_temperature, epsilon,
            data_scale)
        passes.append({"couplings": couplings, "means": means,
                       "variances": variances,
                       "activations": parent_activations})
        if t == len(inverse_temperatures) - 1:
            break
        density = gaussian_density(votes, means, variances)
        couplings = np.zeros((num_children, num_parents))
        for i in range(num_children):
            scores = [(parent_activations[j] * density[i, j])
                      ** (1.0 / temperature) for j in range(num_parents)]
            for j in range(num_parents):
                couplings[i, j] = scores[j] / sum(scores)
    return passes


def matrix_votes(poses, kernel):
    """`V_ij = M_i W_ij` for poses (N, 16) and kernel (N, M, 4, 4)."""
    num_children, num_parents = kernel.shape[:2]
    votes = np.zeros((num_children, num_parents, 16))
    for i in range(num_children):
        pose = poses[i].reshape(4, 4)
        for j in range(num_parents):
            votes[i, j] = (pose @ kernel[i, j]).reshape(16)
    return votes


def grid_votes(poses, kernel, coordinate_addition):
    """Class-capsule votes of a grid `(H, W, T, 16)`, kernel (T, M, 4, 4).

    The children are ordered `(row, column, type)`; with coordinate
    addition the child at grid cell (r, c) adds `(r + 0.5) / H` and
    `(c + 0.5) / W` to the first two entries of its votes.
    """
    height, width, types, _ = poses.shape
    num_parents = kernel.shape[1]
    votes = np.zeros((height * width * types, num_parents, 16))
    index = 0
    for r in range(height):
        for c in range(width):
            for t in range(types):
                pose = poses[r, c, t].reshape(4, 4)
                for j in range(num_parents):
                    votes[index, j] = (pose @ kernel[t, j]).reshape(16)
                    if coordinate_addition:
                        votes[index, j, 0] += (r + 0.5) / height
                        votes[index, j, 1] += (c + 0.5) / width
                index += 1
    return votes
