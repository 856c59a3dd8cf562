"""NumPy references of the MultiMNIST metrics.

Per-digit accuracy, as Efficient-CapsNet's official `multiAccuracy` scores
(each image counts 1, 0.5 or 0), and exact match, as the official
evaluation of Sabour et al. 2017 counts (both digits in the top 2).
"""

import numpy as np


def top_k_matches(y_true, y_pred, k=2):
    """|top_k(y_pred) & top_k(y_true)| per row, with explicit loops."""
    matches = np.zeros(len(y_true))
    for b in range(len(y_true)):
        true_top = set(np.argsort(-y_true[b], kind="stable")[:k].tolist())
        pred_top = set(np.argsort(-y_pred[b], kind="stable")[:k].tolist())
        matches[b] = len(true_top & pred_top)
    return matches


def official_multi_accuracy(y_true, y_pred):
    """The official `multiAccuracy` of `utils/tools.py`, in NumPy."""
    label_pred = np.argsort(y_pred, axis=-1)[:, -2:]
    label_true = np.argsort(y_true, axis=-1)[:, -2:]
    acc = (np.sum(label_pred[:, :1] == label_true, axis=-1)
           + np.sum(label_pred[:, 1:] == label_true, axis=-1))
    return np.mean(acc / 2)


def random_multi_hot(rng, batch_size, num_classes=10, k=2):
    y_true = np.zeros((batch_size, num_classes), "float32")
    for b in range(batch_size):
        y_true[b, rng.choice(num_classes, size=k, replace=False)] = 1.0
    return y_true


def noisy_scores(rng, y_true):
    """Scores that find 0, 1 or 2 of the true digits, in float32."""
    boost = rng.uniform(0.0, 1.0, y_true.shape)
    return (y_true * boost + rng.uniform(size=y_true.shape)).astype("float32")
