"""NumPy references for inverted dot-product attention routing.

Written from Tsai et al. (2020), Section 2 and Procedure 1, and the official
code (`CapsuleFC` / `CapsuleCONV` in `src/layers.py`, `CapsModel.forward` in
`src/capsule_model.py` of apple/ml-capsules-inverted-attention-routing), with
explicit loops: votes loop over children, parents and (for the convolutional
form) output positions and window offsets; the window of output position (h',
w') holds the capsules at (strides * h' + p, strides * w' + q). Capsule maps
are channels last, (B, H, W, N, d), as in the layer.

Inside, votes have the layout (B, X, C, M, d): X output positions, C
children of a window, M parents.
"""

import numpy as np


def layer_norm(x, gamma, beta, epsilon=1e-5):
    """LayerNorm over the last axis (biased variance, as Keras and PyTorch)."""
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def vote(child, transform, pose):
    """One vote: child pose (a,) through transform -> parent pose (z,)."""
    if pose == "matrix":
        side = int(round(np.sqrt(child.shape[-1])))
        # transform (s, s): pose matrix @ transform, flattened row-major.
        return (child.reshape(side, side) @ transform).reshape(-1)
    return child @ transform  # transform (a, z)


def fc_votes(children, kernel, pose):
    """children (B, N, a); kernel (N, s, s, M) or (N, a, M, z).

    Returns votes (B, 1, N, M, z).
    """
    batch, num_children, _ = children.shape
    num_parents = kernel.shape[-1] if pose == "matrix" else kernel.shape[2]
    dim = kernel.shape[1] ** 2 if pose == "matrix" else kernel.shape[3]
    votes = np.zeros((batch, 1, num_children, num_parents, dim))
    for b in range(batch):
        for n in range(num_children):
            for m in range(num_parents):
                transform = (kernel[n, :, :, m] if pose == "matrix"
                             else kernel[n, :, m, :])
                votes[b, 0, n, m] = vote(children[b, n], transform, pose)
    return votes


def conv_votes(poses, kernel, strides, pose):
    """poses (B, H, W, N, a); kernel (k, k, N, s, s, M) or (k, k, N, a, M, z).

    Returns votes (B, H' * W', k * k * N, M, z), children ordered
    (p, q, n), positions (h', w').
    """
    batch, height, width, num_types, _ = poses.shape
    kernel_h, kernel_w = kernel.shape[:2]
    num_parents = kernel.shape[-1] if pose == "matrix" else kernel.shape[4]
    dim = kernel.shape[3] ** 2 if pose == "matrix" else kernel.shape[5]
    out_h = (height - kernel_h) // strides + 1
    out_w = (width - kernel_w) // strides + 1
    votes = np.zeros((batch, out_h, out_w, kernel_h, kernel_w, num_types,
                      num_parents, dim))
    for b in range(batch):
        for h in range(out_h):
            for w in range(out_w):
                for p in range(kernel_h):
                    for q in range(kernel_w):
                        for n in range(num_types):
                            child = poses[b, strides * h + p,
                                          strides * w + q, n]
                            for m in range(num_parents):
                                transform = (
                                    kernel[p, q, n, :, :, m]
                                    if pose == "matrix"
                                    else kernel[p, q, n, :, m, :])
                                votes[b, h, w, p, q, n, m] = vote(
                                    child, transform, pose)
    return votes.reshape(batch, out_h * out_w,
                         kernel_h * kernel_w * num_types, num_parents, dim)


def route_step(votes, parents, gamma=None, beta=None, epsilon=1e-5,
               temperature=1.0):
    """One routing pass (agreement, softmax over parents, weighted sum).

    votes (B, X, C, M, z); parents (B, X, M, z) or None (uniform couplings 1/M).

    Returns `(parents (B, X, M, z), couplings (B, X, C, M))`.
    """
    batch, positions, num_children, num_parents, dim = votes.shape
    if parents is None:
        couplings = np.full(votes.shape[:-1], 1.0 / num_parents)
    else:
        agreement = np.zeros(votes.shape[:-1])
        for m in range(num_parents):
            agreement[..., m] = np.sum(
                votes[:, :, :, m] * parents[:, :, None, m], axis=-1)
        agreement /= np.sqrt(dim)
        couplings = tempered_softmax(agreement, temperature)
    new = np.zeros((batch, positions, num_parents, dim))
    for c in range(num_children):
        new += couplings[:, :, c, :, None] * votes[:, :, c]
    if dim > 1:
        new = layer_norm(new, gamma, beta, epsilon)
    return new, couplings


def tempered_softmax(logits, temperature):
    """softmax(logits / temperature) over the last axis; `np.inf` and `0.0`
    give the limits (uniform, one-hot at the maximum)."""
    if temperature == np.inf:
        return np.full(logits.shape, 1.0 / logits.shape[-1])
    if temperature == 0.0:
        top = logits == logits.max(axis=-1, keepdims=True)  # ties share
        return top / top.sum(axis=-1, keepdims=True)
    logits = logits / temperature
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


class Layer:
    """A routing layer: its form, weights and shapes, for the references."""

    def __init__(self, kernel, pose, strides=None, gamma=None, beta=None,
                 epsilon=1e-5, temperature=1.0):
        self.kernel, self.pose, self.strides = kernel, pose, strides
        self.gamma, self.beta, self.epsilon = gamma, beta, epsilon
        self.temperature = temperature

    def votes(self, children):
        if self.strides is None:
            flat = children.reshape(children.shape[0], -1,
                                    children.shape[-1])
            return fc_votes(flat, self.kernel, self.pose)
        return conv_votes(children, self.kernel, self.strides, self.pose)

    def step(self, children, parents):
        """Parents in the public layout in and out."""
        votes = self.votes(children)
        state = None
        if parents is not None:
            state = parents.reshape(votes.shape[0], votes.shape[1],
                                    *votes.shape[3:])
        state, couplings = route_step(votes, state, self.gamma, self.beta,
                                      self.epsilon, self.temperature)
        return self.public(state, children), couplings

    def public(self, state, children):
        if self.strides is None:
            return state[:, 0]
        kernel_h, kernel_w = self.kernel.shape[:2]
        out_h = (children.shape[1] - kernel_h) // self.strides + 1
        out_w = (children.shape[2] - kernel_w) // self.strides + 1
        return state.reshape(state.shape[0], out_h, out_w, *state.shape[2:])

    def route(self, children, num_iterations):
        """The layer alone: num_iterations passes, the first uniform."""
        parents, couplings = self.step(children, None)
        for _ in range(num_iterations - 1):
            parents, couplings = self.step(children, parents)
        return parents, couplings


def concurrent_routing(inputs, layers, num_iterations,
                       return_couplings=False):
    """Routing across layers, concurrent (Procedure 1 of the paper):
    every layer reads the previous pass's states.

    With `return_couplings`, also returns, per layer, the list of its
    couplings `(B, X, C, M)`, one per pass (`num_iterations` each).
    """
    poses, history = [inputs], [[] for _ in layers]
    for index, layer in enumerate(layers):
        new, couplings = layer.step(poses[-1], None)
        poses.append(new)
        history[index].append(couplings)
    for _ in range(num_iterations - 1):
        steps = [layer.step(poses[index], poses[index + 1])
                 for index, layer in enumerate(layers)]
        poses = [inputs] + [new for new, _ in steps]
        for index, (_, couplings) in enumerate(steps):
            history[index].append(couplings)
    if return_couplings:
        return poses[-1], history
    return poses[-1]


def sequential_routing(inputs, layers, num_iterations,
                       return_couplings=False):
    """Routing across layers, sequential: each layer is routed fully
    before the next.

    With `return_couplings`, also returns each layer's last couplings
    `(B, X, C, M)`.
    """
    poses, last = inputs, []
    for layer in layers:
        poses, couplings = layer.route(poses, num_iterations)
        last.append(couplings)
    if return_couplings:
        return poses, last
    return poses
