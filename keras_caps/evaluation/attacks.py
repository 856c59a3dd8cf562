"""White-box adversarial attacks: FGSM, PGD and the vote attack.

`adversarial_images(predictor, images, labels, epsilon=...)` perturbs raw
test images (pixels in [0, 255]) to raise an attack loss on the class
scores of `predictor` (`keras_caps.evaluation.robustness.classifier(model)`:
capsule lengths, logits or probabilities), and returns the perturbed
images; `attack_accuracy` classifies them; `attack_gradients` is the
gradient the attacks follow.

- **FGSM** (Goodfellow, Shlens & Szegedy, ICLR 2015, §4, the "fast
  gradient sign method"): one step `x' = clip(x + eps sign(grad_x L))`
  (L-inf), or `x' = clip(x + eps grad_x L / ||grad_x L||_2)` (L2).
- **PGD** (Madry et al., ICLR 2018, §2.1): from a random
  start in the eps-ball, `steps` steps `x <- Proj(x + alpha sign(grad))`
  (L2: the gradient divided by its L2 norm), projected back onto the ball
  around the clean image after every step (L-inf: clip each pixel to
  `[x0 - eps, x0 + eps]`; L2: rescale the perturbation to norm `eps` when
  it is longer) and onto the pixel range; the best of `restarts` random
  starts per image (first one that fools the model, then the highest
  loss).
- **Losses** (all maximised): `"margin"`, the capsule margin loss of
  Sabour, Frosst & Hinton (2017, Eq. 4: `m+ = 0.9, m- = 0.1, lambda =
  0.5`) on the scores; `"cross_entropy"`, softmax cross-entropy with the
  scores as logits (for a model ending in softmax probabilities, the
  `"probabilities"` layer of `CNNBaseline`, their logarithms are the
  logits, so the loss is `-log p_t`); `"score_margin"`,
  `max_{j != t} s_j - s_t`, the class-score margin of Carlini & Wagner
  (IEEE S&P 2017, §V.A: their f_6 with kappa = 0, untargeted, on the
  scores instead of the logits).
- **Vote attack** (`target="votes"`; Gu, Wu & Tresp, ICLR 2021, §3): the
  loss is computed on class capsules made by averaging each class's
  votes over the child capsules and squashing the mean, `v_j =
  squash(1/N sum_i u_hat_j|i)`, so the gradient bypasses routing (whose
  iterations can mask it); the full model classifies the result.

Units: `epsilon` is a fraction of the pixel range 255, as the severities
of `keras_caps.evaluation.corruptions`. L-inf: each pixel moves by at most
`epsilon * 255`. L2: the perturbation's L2 norm is at most
`epsilon * 255 * sqrt(height * width * channels)`, so `epsilon` is the
largest root-mean-square change per pixel (as a fraction of 255) and
`epsilon = 1` is the diameter of the pixel cube; the usual MNIST L2
budget of 2.0 on [0, 1] pixels is `epsilon = 2 / 28`.

Gradients go through the active Keras backend: TensorFlow (a
`tf.GradientTape` inside one `tf.function`), JAX (`jax.grad` inside one
`jax.jit`, the weights passed in through a `keras.StatelessScope`) or
PyTorch (`torch.autograd`, eagerly). On TensorFlow and JAX one attack
step is traced once per batch shape and called `steps` times; on every
backend each step frees the last one's graph, so the memory does not
grow with the number of steps. The traced step is cached per predictor
and settings.
The random starts come from a NumPy generator seeded with `seed`, one
per restart drawn over all images, so the result does not depend on
`batch_size`. What the attacks differentiate, and the backends' gradients,
are in `keras_caps.evaluation.attack_objectives`.
"""

import itertools
import weakref

import keras
import numpy as np
from keras import ops

from keras_caps.evaluation.attack_objectives import TINY
from keras_caps.evaluation.attack_objectives import attack_objective
from keras_caps.evaluation.attack_objectives import compile_function
from keras_caps.evaluation.attack_objectives import gradient_function
from keras_caps.evaluation.attack_objectives import output_scores_function

METHODS = ("fgsm", "pgd")
NORMS = ("linf", "l2")
LOSSES = ("margin", "cross_entropy", "score_margin")
TARGETS = ("output", "votes")
PIXEL_RANGE = 255.0
# The step-size rule commonly used with Madry et al.'s PGD: the steps
# together cover 2.5 times the radius, so they can cross the ball and back.
STEP_SIZE_FACTOR = 2.5
# Traced functions per predictor: {predictor: {(norm, loss, target,
# backend): the attack's functions, "scores": the forward pass}}.
_CACHE = weakref.WeakKeyDictionary()


def adversarial_images(predictor, images, labels, *, epsilon, method="pgd",
                       norm="linf", steps=10, step_size=None,
                       random_start=True, restarts=1, loss="margin",
                       seed=0, batch_size=256, target="output"):
    """Adversarial versions of `images` for `predictor` (FGSM or PGD).

    See the module docstring for the attacks, the losses and the units.

    Args:
        predictor: `keras.Model`. Raw pixels in [0, 255] to class scores
            `(batch, classes)` (`keras_caps.evaluation.robustness
            .classifier(model)`): capsule lengths, logits or
            probabilities. Not an exported SavedModel: its gradients are
            not available.
        images: float array `(n, height, width, channels)`, pixels in
            [0, 255].
        labels: int array `(n,)` of class ids.
        epsilon: float in [0, 1]. The perturbation budget as a fraction of
            the pixel range (L2: of `255 * sqrt(pixels)`, see above).
        method: `"fgsm"` (one step of size `epsilon`, no random start,
            `steps`, `step_size`, `random_start` and `restarts` unused) or
            `"pgd"`. Defaults to `"pgd"`.
        norm: `"linf"` or `"l2"`. Defaults to `"linf"`.
        steps: int >= 1. PGD steps. Defaults to `10`.
        step_size: float > 0 or `None`. The PGD step as a fraction of the
            pixel range (same units as `epsilon`); `None` for
            `2.5 * epsilon / steps`. Defaults to `None`.
        random_start: bool. Start PGD at a uniform random point of the
            epsilon-ball. Defaults to `True`.
        restarts: int >= 1. PGD runs per image, from as many random
            starts; each image keeps the first run that fools
            `predictor`, else the one with the highest loss (one run
            without `random_start`). Defaults to `1`.
        loss: `"margin"`, `"cross_entropy"` or `"score_margin"`. Defaults
            to `"margin"`.
        seed: int. Seeds the random starts. Defaults to `0`.
        batch_size: int >= 1. Images attacked at once. Defaults to `256`.
        target: `"output"` (the scores of `predictor`) or `"votes"` (the
            vote attack: the loss on the squashed mean votes of the class
            capsule router, for capsule models only). Defaults to
            `"output"`.

    Returns:
        float32 NumPy array, the shape of `images`: every image within
        `epsilon` of its clean image (in `norm`) and inside [0, 255].

    Example:

    >>> predictor = keras.Sequential([
    ...     keras.Input((4, 4, 1)), keras.layers.Flatten(),
    ...     keras.layers.Dense(3)])
    >>> images = np.full((2, 4, 4, 1), 100.0, "float32")
    >>> adversarial = adversarial_images(
    ...     predictor, images, np.array([0, 1]), epsilon=0.1,
    ...     method="fgsm", loss="cross_entropy")
    >>> float(np.abs(adversarial - images).max()) <= 25.5 + 1e-4
    True
    """
    settings = _check_arguments(predictor, images, labels, locals())
    images = np.asarray(images, "float32")
    labels = np.asarray(labels).astype("int64")
    if len(images) == 0:
        return images.copy()
    attack = _attack_functions(predictor, settings)
    radius = _radius(settings["epsilon"], settings["norm"], images.shape)
    if settings["method"] == "fgsm":
        return _run(attack, images, labels, settings, radius=radius,
                    alpha=radius, steps=1, starts=[None])
    alpha = _radius(settings["step_size"], settings["norm"], images.shape)
    # Drawn one restart at a time: memory for one start, not `restarts`.
    # Without random starts every restart would be the same run.
    starts = ((_random_start(images.shape, radius, settings, restart)
               for restart in range(settings["restarts"]))
              if settings["random_start"] else [None])
    return _run(attack, images, labels, settings, radius=radius,
                alpha=alpha, steps=settings["steps"], starts=starts)


def attack_accuracy(predictor, images, labels, **attack_arguments):
    """Accuracy of `predictor` on `adversarial_images(...)`.

    Args:
        predictor, images, labels: As for `adversarial_images`.
        **attack_arguments: The keyword arguments of
            `adversarial_images` (`epsilon` among them).

    Returns:
        float. The share of the adversarial images `predictor` classifies
        as their label.

    Example:

    >>> predictor = keras.Sequential([
    ...     keras.Input((4, 4, 1)), keras.layers.Flatten(),
    ...     keras.layers.Dense(3)])
    >>> images = np.full((2, 4, 4, 1), 100.0, "float32")
    >>> 0.0 <= attack_accuracy(predictor, images, np.array([0, 1]),
    ...                        epsilon=0.1) <= 1.0
    True
    """
    adversarial = adversarial_images(predictor, images, labels,
                                     **attack_arguments)
    batch_size = attack_arguments.get("batch_size", 256)
    predicted = _predict_classes(predictor, adversarial, batch_size)
    return float(np.mean(predicted == np.asarray(labels)))


def attack_gradients(predictor, images, labels, *, loss="margin",
                     target="output"):
    """The per-image attack loss and its gradient with respect to pixels.

    The quantity FGSM and PGD follow (the gradient of the sum over images
    of the per-image loss), computed through the active backend.

    Args:
        predictor, images, labels, loss, target: As for
            `adversarial_images`.

    Returns:
        `(losses, gradients)`: float32 NumPy arrays `(n,)` and the shape
        of `images`.

    Example:

    >>> predictor = keras.Sequential([
    ...     keras.Input((4, 4, 1)), keras.layers.Flatten(),
    ...     keras.layers.Dense(3)])
    >>> losses, gradients = attack_gradients(
    ...     predictor, np.zeros((2, 4, 4, 1)), np.array([0, 1]))
    >>> losses.shape, gradients.shape
    ((2,), (2, 4, 4, 1))
    """
    settings = _check_arguments(
        predictor, images, labels,
        {"epsilon": 0.0, "method": "fgsm", "norm": "linf", "steps": 1,
         "step_size": None, "random_start": False, "restarts": 1,
         "loss": loss, "seed": 0, "batch_size": 1, "target": target})
    attack = _attack_functions(predictor, settings)
    images = np.asarray(images, "float32")
    onehot = _onehot(np.asarray(labels).astype("int64"),
                     attack["num_classes"])
    losses, gradients = attack["gradient"](ops.convert_to_tensor(images),
                                           ops.convert_to_tensor(onehot))
    return (np.asarray(_to_numpy(losses), "float32"),
            np.asarray(_to_numpy(gradients), "float32"))


# --- Argument checks -------------------------------------------------------


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected one of "
            f"{list(choices)}. Received: {name}={value!r}")
    return value


def _check_fraction(name, value, *, positive=False):
    if isinstance(value, bool) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"Received an invalid type for `{name}`, expected a number in "
            f"[0, 1] (a fraction of the pixel range 0-255). Received: "
            f"{name}={value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or value > 1 or (
            positive and value == 0):
        low = "(0" if positive else "[0"
        raise ValueError(
            f"Received an invalid value for `{name}`, expected a number in "
            f"{low}, 1] (a fraction of the pixel range 0-255). Received: "
            f"{name}={value!r}")
    return value


def _check_count(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"Received an invalid type for `{name}`, expected an integer "
            f">= 1. Received: {name}={value!r}")
    if value < 1:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected an integer "
            f">= 1. Received: {name}={value!r}")
    return int(value)


def _check_predictor(predictor):
    if not isinstance(predictor, keras.Model):
        raise TypeError(
            "Received an invalid type for `predictor`, expected a "
            "`keras.Model` mapping images to class scores, whose gradients "
            "the attack follows (an exported SavedModel or another "
            "callable has none: attack the `.keras` model instead). "
            f"Received: predictor={type(predictor).__name__}")
    if len(predictor.outputs or []) != 1 or len(predictor.inputs or []) != 1:
        raise ValueError(
            "Received an invalid value for `predictor`, expected a model "
            "with one image input and one class-score output (use "
            "`keras_caps.evaluation.robustness.classifier(model)`). "
            f"Received: predictor with {len(predictor.inputs or [])} "
            f"inputs and {len(predictor.outputs or [])} outputs")


def _check_data(predictor, images, labels):
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4:
        raise ValueError(
            "Received an invalid value for `images`, expected an array "
            "(n, height, width, channels). Received: images with shape "
            f"{images.shape}")
    if images.size and not (np.all(np.isfinite(images))
                            and images.min() >= 0
                            and images.max() <= PIXEL_RANGE):
        raise ValueError(
            "Received an invalid value for `images`, expected raw pixels in "
            f"[0, {PIXEL_RANGE:g}] (the predictor scales them itself). "
            f"Received: images in [{images.min()}, {images.max()}]")
    if labels.shape != images.shape[:1] or not np.issubdtype(
            labels.dtype, np.integer):
        raise ValueError(
            "Received an invalid value for `labels`, expected integer "
            f"class ids of shape ({len(images)},). Received: labels with "
            f"shape {labels.shape} and dtype {labels.dtype}")
    num_classes = int(predictor.outputs[0].shape[-1])
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(
            "Received an invalid value for `labels`, expected class ids in "
            f"[0, {num_classes}). Received: labels in [{labels.min()}, "
            f"{labels.max()}]")


def _check_arguments(predictor, images, labels, arguments):
    """The validated settings (a dict) of one attack."""
    _check_predictor(predictor)
    _check_data(predictor, images, labels)
    settings = {
        "epsilon": _check_fraction("epsilon", arguments["epsilon"]),
        "method": _check_choice("method", arguments["method"], METHODS),
        "norm": _check_choice("norm", arguments["norm"], NORMS),
        "steps": _check_count("steps", arguments["steps"]),
        "restarts": _check_count("restarts", arguments["restarts"]),
        "loss": _check_choice("loss", arguments["loss"], LOSSES),
        "target": _check_choice("target", arguments["target"], TARGETS),
        "batch_size": _check_count("batch_size", arguments["batch_size"]),
        "seed": _check_seed(arguments["seed"]),
    }
    if not isinstance(arguments["random_start"], bool):
        raise TypeError(
            "Received an invalid type for `random_start`, expected a bool. "
            f"Received: random_start={arguments['random_start']!r}")
    settings["random_start"] = arguments["random_start"]
    step_size = arguments["step_size"]
    if step_size is None:
        step_size = STEP_SIZE_FACTOR * settings["epsilon"] / settings["steps"]
    else:
        step_size = _check_fraction("step_size", step_size, positive=True)
    settings["step_size"] = step_size
    return settings


def _check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or (
            seed < 0):
        raise ValueError(
            "Received an invalid value for `seed`, expected a non-negative "
            f"integer. Received: seed={seed!r}")
    return int(seed)


# --- Units and random starts ----------------------------------------------


def _radius(fraction, norm, shape):
    """A fraction of the pixel range as a radius in pixels, per `norm`."""
    radius = fraction * PIXEL_RANGE
    if norm == "l2":
        radius *= float(np.sqrt(np.prod(shape[1:])))
    return np.float32(radius)


def _random_start(shape, radius, settings, restart):
    """A uniform random point of the ball, per image: `(n, h, w, c)`."""
    rng = np.random.default_rng([settings["seed"], restart])
    if settings["norm"] == "linf":
        return rng.uniform(-radius, radius, size=shape).astype("float32")
    # Uniform in the L2 ball: a uniform direction (a normalised Gaussian)
    # and a radius r U^(1/d) (the volume grows as r^d).
    directions = rng.standard_normal(size=shape)
    axes = tuple(range(1, len(shape)))
    directions /= np.maximum(
        np.sqrt(np.sum(directions ** 2, axis=axes, keepdims=True)), TINY)
    dimension = int(np.prod(shape[1:]))
    scale = radius * rng.uniform(size=(shape[0],) + (1,) * len(axes)) ** (
        1.0 / dimension)
    return (directions * scale).astype("float32")


def _onehot(labels, num_classes):
    return np.eye(num_classes, dtype="float32")[labels]


# --- Losses and the projection (keras.ops, any backend) --------------------


def _per_image_norm(x):
    axes = tuple(range(1, len(x.shape)))
    return ops.sqrt(ops.sum(ops.square(x), axis=axes, keepdims=True))


def _project(adversarial, clean, radius, norm):
    """`adversarial` moved back into the `radius`-ball around `clean`.

    L-inf: each pixel clipped to `[clean - radius, clean + radius]`; L2:
    the perturbation scaled to norm `radius` where it is longer; then
    every pixel clipped to [0, 255] (which never lengthens the
    perturbation, as `clean` is inside the range). Images `(n, h, w, c)`
    in pixels, `radius` in pixels.
    """
    delta = adversarial - clean
    if norm == "linf":
        delta = ops.clip(delta, -radius, radius)
    else:
        length = _per_image_norm(delta)
        delta = delta * ops.minimum(
            1.0, radius / ops.maximum(length, TINY))
    return ops.clip(clean + delta, 0.0, PIXEL_RANGE)


def _ascent(adversarial, gradient, alpha, norm):
    """One step of size `alpha` up the gradient, in `norm`."""
    if norm == "linf":
        return adversarial + alpha * ops.sign(gradient)
    length = _per_image_norm(gradient)
    return adversarial + alpha * gradient / ops.maximum(length, TINY)


# --- The traced attack ------------------------------------------------------


def _attack_functions(predictor, settings):
    """The traced gradient, step and evaluation of one attack (cached)."""
    key = (settings["norm"], settings["loss"], settings["target"],
           keras.backend.backend())
    cached = _CACHE.setdefault(predictor, {})
    if key in cached:
        return cached[key]
    norm = settings["norm"]
    objective = attack_objective(predictor, settings["loss"],
                                 settings["target"])
    gradient = gradient_function(objective)

    def step(x, clean, onehot, radius, alpha):
        _, grads = gradient(x, onehot)
        return _project(_ascent(x, grads, alpha, norm), clean, radius, norm)

    output_scores = output_scores_function(predictor)

    def evaluate(x, onehot):
        return objective(x, onehot), output_scores(x)

    variables = list(predictor.variables)
    functions = {
        "num_classes": int(predictor.outputs[0].shape[-1]),
        "gradient": compile_function(gradient, variables),
        "step": compile_function(step, variables),
        "evaluate": compile_function(evaluate, variables),
    }
    cached[key] = functions
    return functions


# --- The attack loop -------------------------------------------------------


def _attack_batch(attack, clean, start, onehot, radius, alpha, steps):
    """`steps` traced steps on one batch; NumPy in, tensors out."""
    x = clean if start is None else np.clip(clean + start, 0.0, PIXEL_RANGE)
    clean = ops.convert_to_tensor(clean)
    x = ops.convert_to_tensor(x.astype("float32"))
    onehot = ops.convert_to_tensor(onehot)
    radius = ops.convert_to_tensor(np.float32(radius))
    alpha = ops.convert_to_tensor(np.float32(alpha))
    for _ in range(steps):
        x = attack["step"](x, clean, onehot, radius, alpha)
    return x, onehot


def _run(attack, images, labels, settings, *, radius, alpha, steps, starts):
    """Every batch, every restart; the best restart per image.

    `starts`: an iterable of random starts (the shape of `images`), or of
    one `None` (no random start).
    """
    onehot = _onehot(labels, attack["num_classes"])
    batch_size = settings["batch_size"]
    best = best_fooled = best_losses = None
    starts = iter(starts)
    first = next(starts)
    keep_best = first is not None and settings["restarts"] > 1
    for start in itertools.chain([first], starts):
        result = np.empty_like(images)
        fooled = np.zeros(len(images), bool)
        losses = np.zeros(len(images), "float32")
        for low in range(0, len(images), batch_size):
            batch = slice(low, low + batch_size)
            x, batch_onehot = _attack_batch(
                attack, images[batch],
                None if start is None else start[batch], onehot[batch],
                radius, alpha, steps)
            result[batch] = _to_numpy(x)
            if keep_best:
                batch_losses, scores = attack["evaluate"](x, batch_onehot)
                losses[batch] = _to_numpy(batch_losses)
                fooled[batch] = np.argmax(
                    _to_numpy(scores), axis=-1) != labels[batch]
        if best is None:
            best, best_fooled, best_losses = result, fooled, losses
            continue
        # The first restart that fools the model, else the highest loss.
        better = (fooled & ~best_fooled) | (
            ~fooled & ~best_fooled & (losses > best_losses))
        best[better] = result[better]
        best_losses = np.where(better, losses, best_losses)
        best_fooled = best_fooled | fooled
    return best


def _predict_classes(predictor, images, batch_size):
    """The predicted class of every image, by a traced forward pass
    (cached with the attack steps, under the key `"scores"`)."""
    cached = _CACHE.setdefault(predictor, {})
    if "scores" not in cached:
        cached["scores"] = compile_function(output_scores_function(predictor),
                                    list(predictor.variables))
    predicted = [np.zeros(0, "int64")]
    for low in range(0, len(images), batch_size):
        scores = cached["scores"](ops.convert_to_tensor(
            np.asarray(images[low:low + batch_size], "float32")))
        predicted.append(np.argmax(_to_numpy(scores), axis=-1))
    return np.concatenate(predicted)


def _to_numpy(x):
    """A backend tensor as a NumPy array (PyTorch: detached, on the CPU)."""
    if keras.backend.backend() == "torch":
        return x.detach().cpu().numpy()
    return ops.convert_to_numpy(x)
