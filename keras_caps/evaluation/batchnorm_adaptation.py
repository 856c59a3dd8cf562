"""Test-time BatchNorm adaptation: statistics of the data being classified.

At inference a `BatchNormalization` layer normalises with the moving
averages of its training batches. A corruption (noise, occlusion, ...)
shifts the statistics of the activations, and the frozen averages no
longer centre and scale them: a model can then predict one class for
most images for reasons unrelated to the rest of the architecture.
Schneider et al. (2020, "Improving robustness against common corruptions
by covariate shift adaptation", NeurIPS; Section 2, Eq. 1 with the source
statistics given no weight, N = 0) and Nado et al. (2020, "Evaluating
prediction-time batch normalization for robustness under covariate
shift") replace them by the statistics of the shifted test data.

`adapted_batchnorm(model, images)` does so for a whole test set: layer by
layer in the model's order, each layer's moving mean and variance become
the exact mean and (biased, as Keras' batch statistics) variance over all
`images` of that layer's inputs, computed in batches with the earlier
layers already adapted; on leaving the `with` block the original
statistics are restored, so the model (and any file saved from it) is
unchanged. Only `keras` and NumPy are used: it runs on every backend.
"""

import contextlib

import keras
import numpy as np


def batchnorm_layers(model):
    """The `BatchNormalization` layers of a functional `model`, in order.

    Raises:
        ValueError: a `BatchNormalization` inside a nested model or layer
            (only the top-level graph is adapted), or one called more
            than once (its inputs are not one tensor).

    Example:

    >>> inputs = keras.Input((4, 4, 1))
    >>> x = keras.layers.BatchNormalization(name="bn")(inputs)
    >>> [layer.name for layer in batchnorm_layers(keras.Model(inputs, x))]
    ['bn']
    """
    found = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            if len(layer._inbound_nodes) != 1:
                raise ValueError(
                    f"The BatchNormalization layer {layer.name!r} is called "
                    f"{len(layer._inbound_nodes)} times; test-time "
                    "adaptation estimates one set of statistics per layer "
                    "from one input.")
            found.append(layer)
            continue
        nested = [sub.name for sub in getattr(layer, "_flatten_layers",
                                              lambda **_: [])(
            include_self=False, recursive=True)
            if isinstance(sub, keras.layers.BatchNormalization)]
        if nested:
            raise ValueError(
                f"{layer.name!r} holds BatchNormalization layers {nested} "
                "inside it; test-time adaptation adapts those of the "
                "model's own graph only. Rebuild the model without the "
                "nesting.")
    return found


def _batch_moments_model(model, layer):
    """A model giving, per batch of `model`'s inputs, the mean and biased
    variance per channel of `layer`'s input over everything else: only
    `(channels,)` vectors leave the graph, not the activations."""
    inputs = layer.input
    axis = layer.axis % len(inputs.shape)
    reduced = [index for index in range(len(inputs.shape)) if index != axis]
    # In float32 even under mixed precision: squares overflow float16.
    values = keras.ops.cast(inputs, "float32")
    mean = keras.ops.mean(values, axis=reduced)  # (channels,)
    per_channel = [1] * len(inputs.shape)
    per_channel[axis] = -1
    centred = values - keras.ops.reshape(mean, per_channel)
    variance = keras.ops.mean(keras.ops.square(centred), axis=reduced)
    return keras.Model(model.inputs[0], [mean, variance])


def _channel_moments(moments_model, images, batch_size):
    """Mean and biased variance per channel over all `images`: the
    per-batch moments of `moments_model` merged in float64 (Chan, Golub &
    LeVeque's pairwise update)."""
    count, mean, squares = 0, None, None
    for start in range(0, len(images), batch_size):
        batch = images[start:start + batch_size]
        batch_mean, batch_variance = (
            keras.ops.convert_to_numpy(value).astype("float64")
            for value in moments_model.predict_on_batch(batch))
        # Every channel's moments are over the same number of values.
        batch_count = len(batch)
        batch_squares = batch_variance * batch_count
        if mean is None:
            count, mean, squares = batch_count, batch_mean, batch_squares
            continue
        total = count + batch_count
        delta = batch_mean - mean
        mean = mean + delta * batch_count / total
        squares = squares + batch_squares + (
            delta ** 2 * count * batch_count / total)
        count = total
    return mean, squares / count


def _check_images(model, images):
    if len(model.inputs) != 1:
        raise ValueError(
            "Test-time adaptation feeds the images to a model of one "
            f"input. Received: a model with {len(model.inputs)} inputs")
    images = np.asarray(images)
    if images.ndim < 1 or len(images) == 0:
        raise ValueError(
            "Received an invalid value for `images`, expected at least one "
            f"image. Received: images of shape {images.shape}")
    return images


@contextlib.contextmanager
def adapted_batchnorm(model, images, batch_size=256):
    """Within the block, `model`'s BatchNorm statistics are those of
    `images`; afterwards the original ones are back.

    Args:
        model: A functional `keras.Model` of one input.
        images: array. The data to adapt to (e.g. a corrupted test set),
            as the model takes it.
        batch_size: int. How many images go through the model at once.

    Yields:
        The adapted `BatchNormalization` layers (none: nothing changes).

    Example:

    ```python
    with adapted_batchnorm(predictor, noisy_images):
        adapted = predictor.predict(noisy_images).argmax(axis=-1)
    ```
    """
    images = _check_images(model, images)
    layers = batchnorm_layers(model)
    saved = [(keras.ops.convert_to_numpy(layer.moving_mean),
              keras.ops.convert_to_numpy(layer.moving_variance))
             for layer in layers]
    try:
        for layer in layers:
            mean, variance = _channel_moments(
                _batch_moments_model(model, layer), images, batch_size)
            layer.moving_mean.assign(
                mean.astype(layer.moving_mean.dtype))
            layer.moving_variance.assign(
                variance.astype(layer.moving_variance.dtype))
        yield layers
    finally:
        for layer, (mean, variance) in zip(layers, saved, strict=True):
            layer.moving_mean.assign(mean)
            layer.moving_variance.assign(variance)
