"""What a gradient attack differentiates, and how, on each backend.

The objective is a per-image loss on class scores (`attack_loss`): the
model's own outputs, or, for the vote attack (Gu, Wu & Tresp, ICLR 2021,
§3), class capsules made by squashing each class's mean vote, which the
router names through `Router.vote_squash`. `gradient_function` takes its
gradient with respect to the images with TensorFlow, JAX or PyTorch, and
`compile_function` traces a step once per input shape.
"""

import weakref

import keras
from keras import ops

from keras_caps import model_roles as roles
from keras_caps.layers.router import Router
from keras_caps.ops import capsule_ops

# Floors of the norms the L2 step and projection divide by.
# Keeps logarithms and divisions by norms finite.
TINY = 1e-12
# The margin loss's constants (Sabour, Frosst & Hinton 2017, Eq. 4).
_POSITIVE_MARGIN, _NEGATIVE_MARGIN, _NEGATIVE_WEIGHT = 0.9, 0.1, 0.5


def attack_loss(scores, onehot, loss):
    """The per-example attack loss `(batch,)` of scores `(batch, classes)`.

    Float32; see the module docstring for the three losses.
    """
    scores = ops.cast(scores, "float32")
    if loss == "margin":
        present = onehot * ops.square(
            ops.relu(_POSITIVE_MARGIN - scores))
        absent = _NEGATIVE_WEIGHT * (1.0 - onehot) * ops.square(
            ops.relu(scores - _NEGATIVE_MARGIN))
        return ops.sum(present + absent, axis=-1)
    true_score = ops.sum(onehot * scores, axis=-1)
    if loss == "cross_entropy":
        return ops.logsumexp(scores, axis=-1) - true_score
    # The true class is pushed far below every other score.
    others = scores - onehot * 1e9
    return ops.max(others, axis=-1) - true_score


def _vote_router(predictor):
    """The class-capsule router of `predictor`, for the vote attack."""
    try:
        router = roles.router_layer(predictor)
    except ValueError:
        router = None
    if not isinstance(router, Router):
        raise ValueError(
            "Received an invalid value for `target`: target='votes' (the "
            "vote attack of Gu, Wu & Tresp 2021) needs a capsule model "
            "whose class capsules come from a router with votes; "
            f"{predictor.name!r} has no router (a CNN?). Use "
            "target='output'. Received: target='votes'")
    variant = router.vote_squash
    if variant is None:
        raise ValueError(
            "Received an invalid value for `target`: target='votes' "
            "replaces the class capsules squash(sum_i c_ij u_hat_j|i) by "
            "the squashed mean vote, so it needs a router whose class "
            "capsules are squashed sums of weighted votes (DynamicRouting "
            "and its `uniform` and `hybrid` forms, FCCaps, AttentionRouting "
            f"with value_form='votes'); the router {type(router).__name__} "
            f"({router.name!r}) of {predictor.name!r} is not one (its "
            "class scores are activations, or its votes are not one "
            "vector per child and class). Use target='output'. Received: "
            "target='votes'")
    return router, variant


def _vote_scores_function(predictor):
    """`x -> |squash(mean_i votes[:, i, j])|`, `(batch, classes)`.

    The vote attack's class scores (Gu, Wu & Tresp 2021, §3): the
    sub-model from the image input to the router's input (the child
    capsules, sharing the layers and weights of `predictor`), then the
    router's votes `u_hat_j|i` from `Router.routing_trace` `(batch,
    children, classes, dim)`, averaged over the children, squashed with
    the router's own squash (Sabour's for `DynamicRouting`, the efficient
    one for `FCCaps`, the layer's `squash` for `AttentionRouting`) and
    measured. Routing runs but its couplings (and `DynamicRouting`'s
    optional bias) do not reach the scores.
    """
    router, variant = _vote_router(predictor)
    children_model = keras.Model(predictor.inputs[0], router.input)
    num_classes = int(predictor.outputs[0].shape[-1])
    model_name = predictor.name

    def scores(x):
        children = children_model(x, training=False)
        votes = router.routing_trace(children)["votes"]  # (b, i, j, z)
        # Checked while tracing (an eager probe is slow on JAX).
        _check_votes(votes, num_classes, router, model_name)
        mean = ops.mean(capsule_ops.at_least_float32(votes), axis=1)
        classes = capsule_ops.squash(mean, variant=variant)  # (b, j, z)
        return capsule_ops.capsule_length(classes)  # (b, j)

    return scores


def _check_votes(votes, num_classes, router, model_name):
    if votes is None or len(votes.shape) != 4 or (
            votes.shape[2] != num_classes):
        raise ValueError(
            "Received an invalid value for `target`: target='votes' needs "
            "the router to expose one vote per child capsule and class "
            f"(batch, children, {num_classes}, dim); the router "
            f"{type(router).__name__} ({router.name!r}) of "
            f"{model_name!r} does not (its votes: "
            f"{None if votes is None else tuple(votes.shape)}). Use "
            "target='output'. Received: target='votes'")


def _gives_probabilities(predictor):
    """Whether `predictor` ends in the softmax `PROBABILITIES` layer."""
    try:
        layer = predictor.get_layer(roles.PROBABILITIES)
    except ValueError:
        return False
    return layer.output is predictor.outputs[0]


def output_scores_function(predictor):
    """`x -> predictor(x)`, holding `predictor` by a weak reference.

    The traced functions are cached per predictor in a
    `WeakKeyDictionary`: a strong reference from them would keep every
    attacked model alive.
    """
    reference = weakref.ref(predictor)

    def scores(x):
        return reference()(x, training=False)

    return scores


def attack_objective(predictor, loss, target):
    """`(x, onehot) -> per-example loss (batch,)` on `target`."""
    if target == "votes":
        scores = _vote_scores_function(predictor)
    else:
        scores = output_scores_function(predictor)
        if loss == "cross_entropy" and _gives_probabilities(predictor):
            probabilities = scores

            def scores(x):  # log p as logits: the loss is -log p_t
                return ops.log(ops.maximum(
                    ops.cast(probabilities(x), "float32"), TINY))

    def objective(x, onehot):
        return attack_loss(scores(x), onehot, loss)

    return objective


def gradient_function(objective):
    """`(x, onehot) -> (losses, d sum(losses) / dx)` on the backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def gradient(x, onehot):
            with tf.GradientTape() as tape:
                tape.watch(x)
                losses = objective(x, onehot)
                total = tf.reduce_sum(losses)
            return losses, _checked(tape.gradient(total, x))
    elif backend == "jax":
        import jax

        def gradient(x, onehot):
            def total(images):
                losses = objective(images, onehot)
                return ops.sum(losses), losses

            grads, losses = jax.grad(total, has_aux=True)(x)
            return losses, grads
    elif backend == "torch":
        import torch

        def gradient(x, onehot):
            with torch.enable_grad():
                leaf = x.detach().clone().requires_grad_(True)
                losses = objective(leaf, onehot)
                total = ops.sum(losses)
                (grads,) = (torch.autograd.grad(total, leaf,
                                                allow_unused=True)
                            if total.requires_grad else (None,))
            return losses.detach(), _checked(grads)
    else:
        raise ValueError(
            "Attacks need gradients, on the tensorflow, jax or torch "
            f"backend. Received: backend={backend!r}")
    return gradient


def _checked(gradient):
    """`gradient`, or a clear error where the scores do not depend on the
    pixels differentiably (TensorFlow and PyTorch say so with `None`)."""
    if gradient is None:
        raise ValueError(
            "Received an invalid value for `predictor`: its class scores "
            "have no gradient with respect to the images (a wrapped "
            "SavedModel or a stopped gradient?), so no gradient attack "
            "applies. Attack the `.keras` model instead.")
    return gradient


def compile_function(function, variables):
    """`function` traced once per input shape on the active backend.

    TensorFlow: a `tf.function`. JAX: `jax.jit` of a pure function of the
    variable values (bound by a `keras.StatelessScope`), so retrained
    weights are read on every call. PyTorch: eager, under `no_grad` for
    everything but the gradient itself.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, autograph=False)
    if backend == "jax":
        import jax

        def pure(values, *args):
            with keras.StatelessScope(
                    state_mapping=list(zip(variables, values))):
                return function(*args)

        jitted = jax.jit(pure)
        return lambda *args: jitted([v.value for v in variables], *args)
    import torch

    def eager(*args):
        with torch.no_grad():
            return function(*args)

    return eager
