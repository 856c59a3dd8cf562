"""The MNIST training augmentation of Efficient-CapsNet, on `tf.data`.

The four steps of `augmentation_steps` (rotate, shift, squish, erase, as in
the official code of Mazzia et al. 2021; see there) run by the `tf_data_ops`
executor: batched TensorFlow ops, without OpenCV or `py_function`, every
random value drawn per image by stateless ops, so a batch and a seed fix
the result. `numpy_augmentation` runs the same steps with NumPy.
"""

import tensorflow as tf

from keras_caps.datasets import augmentation_steps as steps
from keras_caps.datasets import tf_data_ops


def augment_mnist(images, seed):
    """Rotates, shifts, squishes and erases a batch of 28 x 28 digits.

    Args:
        images: float32 tensor of shape `(batch_size, 28, 28, 1)`, raw
            pixels in [0, 255].
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.

    Returns:
        float32 tensor of the same shape, values in [0, 255].

    Example:

    >>> images = tf.zeros((2, 28, 28, 1))
    >>> tuple(augment_mnist(images, seed=(1, 2)).shape)
    (2, 28, 28, 1)
    """
    images = tf.convert_to_tensor(images, dtype=tf.float32)
    return apply_parameters(images,
                            draw_parameters(tf.shape(images)[0], seed))


def draw_parameters(batch_size, seed):
    """The random values `augment_mnist(images, seed)` draws, per image.

    The dict of `augmentation_steps.draw_parameters` (see there), drawn by
    stateless ops from `seed`.

    Args:
        batch_size: int or scalar tensor.
        seed: int or int64 tensor of shape `(2,)`. The stateless seed.

    Returns:
        dict of tensors with leading dimension `batch_size`.

    Example:

    >>> draws = draw_parameters(3, seed=(1, 2))
    >>> tuple(draws["erase_corners"].shape)
    (3, 2)
    """
    return steps.draw_parameters(batch_size, _random(seed), tf_data_ops)


def apply_parameters(images, parameters):
    """Applies the four steps with given draws (see `draw_parameters`);
    with the draws of `numpy_augmentation.draw_parameters` it gives the
    NumPy pipeline's pixels (up to float rounding).

    Args:
        images: float32 tensor `(batch_size, 28, 28, 1)`, raw pixels.
        parameters: dict of per-image draws, the keys of
            `draw_parameters`.

    Returns:
        float32 tensor of the same shape, values in [0, 255].

    Example:

    >>> images = tf.zeros((2, 28, 28, 1))
    >>> out = apply_parameters(images, draw_parameters(2, seed=(1, 2)))
    >>> tuple(out.shape)
    (2, 28, 28, 1)
    """
    images = tf.convert_to_tensor(images, dtype=tf.float32)
    parameters = {key: tf.convert_to_tensor(value)
                  for key, value in parameters.items()}
    return steps.apply_parameters(images, parameters, tf_data_ops)


def _random(seed):
    """One stateless seed per draw of `steps.draw_parameters`, split from
    `seed` as the steps drew them before they were written once (so a seed
    still gives the draws it gave)."""
    seed = tf.convert_to_tensor(seed, dtype_hint=tf.int64)
    rotation, shift, squish, erase = tf.unstack(
        tf.random.experimental.stateless_split(seed, num=4))
    direction, amount = tf.unstack(
        tf.random.experimental.stateless_split(shift, num=2))
    return tf_data_ops.StatelessRandom(
        [rotation, direction, amount, squish, erase])
