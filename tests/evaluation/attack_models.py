"""Tiny models and NumPy references of the attack tests.

Imported by `attacks_test.py` and by the subprocesses it starts on other
backends, so it imports only Keras, NumPy and keras_caps' layers.
"""

import keras
import numpy as np

from keras_caps import layers
from keras_caps import model_roles as roles

NUM_CLASSES = 3
CHILDREN, CHILD_DIM, CLASS_DIM = 6, 4, 4
# The squash's and the length's epsilon (keras_caps.ops.squash).
SQUASH_EPSILON = 1e-7


def linear_model(rng):
    """scores = flatten(x) @ W + b: a (16, 3) kernel on 4x4x1 images."""
    model = keras.Sequential([keras.Input((4, 4, 1)),
                              keras.layers.Flatten(),
                              keras.layers.Dense(NUM_CLASSES, name="logits")])
    kernel = rng.normal(size=(16, NUM_CLASSES)).astype("float32") / 50.0
    bias = rng.normal(size=NUM_CLASSES).astype("float32")
    model.get_layer("logits").set_weights([kernel, bias])
    return model, kernel, bias


def capsule_model(router_name, seed=0):
    """x / 255 -> dense 24 -> 6 capsules of 4 -> squash -> router -> length.

    `router_name`: "dynamic" (`DynamicRouting`, 3 iterations, Sabour's
    squash, kernel (children, child_dim, classes, class_dim)) or "fccaps"
    (`FCCaps`, the efficient squash, kernel (classes, children,
    child_dim, class_dim)). Returns the model and its weights.
    """
    rng = np.random.default_rng(seed)
    images = keras.Input((4, 4, 1), name=roles.IMAGE)
    x = keras.layers.Rescaling(1.0 / 255.0)(images)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(CHILDREN * CHILD_DIM, name="primary")(x)
    x = keras.layers.Reshape((CHILDREN, CHILD_DIM))(x)  # (b, 6, 4)
    x = layers.Squash(variant="sabour")(x)
    if router_name == "dynamic":
        router = layers.DynamicRouting(NUM_CLASSES, CLASS_DIM,
                                       num_iterations=3,
                                       name=roles.CLASS_CAPSULES)
    else:
        router = layers.FCCaps(NUM_CLASSES, CLASS_DIM,
                               name=roles.CLASS_CAPSULES)
    lengths = layers.Length(name=roles.LENGTH)(router(x))  # (b, 3)
    model = keras.Model(images, lengths)
    weights = {
        "dense": rng.normal(size=(16, CHILDREN * CHILD_DIM)) * 3.0,
        "bias": rng.normal(size=CHILDREN * CHILD_DIM) * 0.5,
        "kernel": rng.normal(size=tuple(router.kernel.shape)),
    }
    model.get_layer("primary").set_weights(
        [weights["dense"].astype("float32"),
         weights["bias"].astype("float32")])
    router.kernel.assign(weights["kernel"].astype("float32"))
    return model, weights


def em_routing_model():
    """The capsule model's stem into vector-kind `EMRouting`, whose class
    scores are EM activations."""
    images = keras.Input((4, 4, 1), name=roles.IMAGE)
    x = keras.layers.Flatten()(images)
    x = keras.layers.Reshape((CHILDREN, CHILD_DIM))(
        keras.layers.Dense(CHILDREN * CHILD_DIM)(x))
    x = layers.EMRouting(NUM_CLASSES, CLASS_DIM, input_kind="vector",
                         output_kind="vector",
                         name=roles.CLASS_CAPSULES)(layers.Squash()(x))
    return keras.Model(images, layers.Length(name=roles.LENGTH)(x))


def vector_routing_model():
    """The capsule model's stem into `VectorRouting`, which has no votes
    per child and class to average."""
    images = keras.Input((4, 4, 1), name=roles.IMAGE)
    x = keras.layers.Flatten()(images)
    x = keras.layers.Reshape((CHILDREN, CHILD_DIM))(
        keras.layers.Dense(CHILDREN * CHILD_DIM)(x))
    x = layers.VectorRouting(NUM_CLASSES, CLASS_DIM, num_inputs=CHILDREN,
                             name=roles.ROUTING)(x)
    x = layers.Squash(name=roles.CLASS_CAPSULES)(x)
    return keras.Model(images, layers.Length(name=roles.LENGTH)(x))


# --- NumPy references, from the papers' equations --------------------------


def numpy_squash(s, variant):
    norm = np.sqrt(np.sum(s ** 2, axis=-1, keepdims=True) + SQUASH_EPSILON)
    if variant == "sabour":  # |s|^2 / (1 + |s|^2) s / |s|
        return s * norm / (1.0 + norm ** 2)
    return (1.0 - np.exp(-norm)) * s / norm  # Mazzia et al. 2021


def numpy_margin_loss(scores, onehot):
    # Sabour, Frosst & Hinton (2017), Eq. 4.
    present = onehot * np.maximum(0.0, 0.9 - scores) ** 2
    absent = 0.5 * (1 - onehot) * np.maximum(0.0, scores - 0.1) ** 2
    return np.sum(present + absent, axis=-1)


def numpy_vote_loss(images, labels, weights, router_name):
    """The margin loss on |squash(mean_i votes)| (Gu, Wu & Tresp 2021)."""
    x = images.reshape(len(images), -1) / 255.0
    children = (x @ weights["dense"] + weights["bias"]).reshape(
        len(images), CHILDREN, CHILD_DIM)
    children = numpy_squash(children, "sabour")
    if router_name == "dynamic":
        votes = np.einsum("bid,idjz->bijz", children, weights["kernel"])
        variant = "sabour"
    else:
        votes = np.einsum("bid,jidz->bijz", children, weights["kernel"])
        variant = "efficient"
    classes = numpy_squash(votes.mean(axis=1), variant)  # (b, j, z)
    scores = np.sqrt(np.sum(classes ** 2, axis=-1) + SQUASH_EPSILON)
    return numpy_margin_loss(scores, np.eye(NUM_CLASSES)[labels])


def finite_difference(function, images, step=0.01):
    """Central differences of `function` (one value per image) per pixel."""
    gradient = np.zeros_like(images)
    flat_images, flat_gradient = images.reshape(len(images), -1), \
        gradient.reshape(len(images), -1)
    for pixel in range(flat_images.shape[1]):
        up, down = flat_images.copy(), flat_images.copy()
        up[:, pixel] += step
        down[:, pixel] -= step
        flat_gradient[:, pixel] = (
            function(up.reshape(images.shape))
            - function(down.reshape(images.shape))) / (2 * step)
    return gradient


def linear_gradient(images, labels, kernel, bias, loss):
    """d loss / d x for scores = x W + b, in closed form."""
    scores = images.reshape(len(images), -1) @ kernel + bias
    onehot = np.eye(NUM_CLASSES)[labels]
    if loss == "score_margin":  # d/ds (s_j* - s_t)
        rival = np.argmax(scores - onehot * 1e9, axis=-1)
        d_scores = np.eye(NUM_CLASSES)[rival] - onehot
    elif loss == "cross_entropy":  # softmax(s) - onehot
        exp = np.exp(scores - scores.max(-1, keepdims=True))
        d_scores = exp / exp.sum(-1, keepdims=True) - onehot
    else:  # margin loss, Eq. 4 differentiated
        d_scores = (-2 * onehot * np.maximum(0, 0.9 - scores)
                    + (1 - onehot) * np.maximum(0, scores - 0.1))
    return (d_scores @ kernel.T).reshape(images.shape)


