"""Self-routing in NumPy float64, written from Hahn, Pyeon & Kim (2019), §3.

Per child i with pose u_i and activation a_i, and parent j:

    c_ij  = softmax_j(W_route_i u_i + b_route_i)
    r_ij  = c_ij a_i
    a_j   = sum_i r_ij / sum_i a_i
    v_j|i = W_pose_ij u_i
    u_j   = sum_i r_ij v_j|i / sum_i r_ij

Plain loops over children and parents (and, convolutional, over output
positions and kernel offsets), so they share nothing with the layers'
vectorised code. No floors: the checks use children that are on.
"""

import numpy as np


def softmax(logits):
    shifted = logits - logits.max()
    exp = np.exp(shifted)
    return exp / exp.sum()


def route(poses, activations, pose_kernel, route_kernel, route_bias,
          temperature=1.0):
    """One example's children -> its parents.

    Args:
        poses: `(N, d)`.
        activations: `(N,)`.
        pose_kernel: `(N, d, M, z)`: `W_pose[i, j] = pose_kernel[i, :, j, :].T`.
        route_kernel: `(N, d, M)`: `W_route[i] = route_kernel[i].T`.
        route_bias: `(N, M)`.
        temperature: divides the routing logits.

    Returns:
        `(parent_poses (M, z), parent_activations (M,), couplings (N, M),
        logits (N, M))`.
    """
    num_children, _, num_parents, capsule_dim = pose_kernel.shape
    logits = np.zeros((num_children, num_parents))
    couplings = np.zeros((num_children, num_parents))
    for i in range(num_children):
        logits[i] = route_kernel[i].T @ poses[i] + route_bias[i]
        couplings[i] = softmax(logits[i] / temperature)
    parent_poses = np.zeros((num_parents, capsule_dim))
    parent_activations = np.zeros(num_parents)
    for j in range(num_parents):
        weighted_sum = np.zeros(capsule_dim)
        mass = 0.0
        for i in range(num_children):
            routed = couplings[i, j] * activations[i]
            vote = pose_kernel[i, :, j, :].T @ poses[i]
            weighted_sum += routed * vote
            mass += routed
        parent_poses[j] = weighted_sum / mass
        parent_activations[j] = mass / activations.sum()
    return parent_poses, parent_activations, couplings, logits


def conv_route(poses, activations, pose_kernel, route_kernel, route_bias,
               strides, padding):
    """One example's capsule map -> its parent map, one position at a time.

    Args:
        poses: `(H, W, B, d)`.
        activations: `(H, W, B)`.
        pose_kernel: `(K_h, K_w, B, d, C, z)`, shared across positions.
        route_kernel: `(K_h, K_w, B, d, C)`.
        route_bias: `(K_h, K_w, B, C)`.
        strides: `(s_h, s_w)`.
        padding: `"valid"`, or `"same"`: `ceil(H / s)` output rows, the
            grid padded with capsules of pose 0 and activation 0, the
            smaller half of the padding above (as Keras' convolutions).

    Returns:
        `(parent_poses (H', W', C, z), parent_activations (H', W', C),
        couplings (H' * W' * K_h * K_w * B, C))`, the couplings ordered
        position, kernel row, kernel column, child type.
    """
    kernel_h, kernel_w, num_types = pose_kernel.shape[:3]
    height, width = poses.shape[:2]
    (top, out_h), (left, out_w) = (
        _padding(height, kernel_h, strides[0], padding),
        _padding(width, kernel_w, strides[1], padding))
    num_parents, capsule_dim = pose_kernel.shape[4:]
    parent_poses = np.zeros((out_h, out_w, num_parents, capsule_dim))
    parent_activations = np.zeros((out_h, out_w, num_parents))
    couplings = []
    for row in range(out_h):
        for column in range(out_w):
            window_poses, window_activations = [], []
            for p in range(kernel_h):
                for q in range(kernel_w):
                    y = row * strides[0] + p - top
                    x = column * strides[1] + q - left
                    inside = 0 <= y < height and 0 <= x < width
                    for t in range(num_types):
                        window_poses.append(
                            poses[y, x, t] if inside
                            else np.zeros(poses.shape[-1]))
                        window_activations.append(
                            activations[y, x, t] if inside else 0.0)
            flat = (kernel_h * kernel_w * num_types,)
            result = route(
                np.array(window_poses), np.array(window_activations),
                pose_kernel.reshape(flat + pose_kernel.shape[3:]),
                route_kernel.reshape(flat + route_kernel.shape[3:]),
                route_bias.reshape(flat + route_bias.shape[3:]))
            parent_poses[row, column] = result[0]
            parent_activations[row, column] = result[1]
            couplings.append(result[2])
    return parent_poses, parent_activations, np.concatenate(couplings)


def _padding(size, kernel, stride, padding):
    """`(rows padded before, output rows)` along one axis."""
    if padding == "valid":
        return 0, (size - kernel) // stride + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, out
