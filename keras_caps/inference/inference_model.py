import keras

from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export


@keras_caps_export("keras_caps.inference.inference_model")
def inference_model(model, reconstruction=False):
    """The inference graph of a capsule-network application: images in.

    Shares the layers (and weights) of `model`, a model built by an
    application builder such as `EfficientCapsNet`. The result maps raw
    images to the class-capsule lengths; with `reconstruction=True` it maps
    them to `{"length": scores, "reconstruction": images}`, where the decoder
    reads the longest class capsule(s), as at test time. This is the model
    that gets exported: it takes no labels.

    Args:
        model: A model with layers named `"digit_caps"` and `"length"` (and
            `"mask"` and `"decoder"` for reconstructions), whose first input
            is the image.
        reconstruction: bool. Also return the reconstruction. Defaults to
            `False`.

    Returns:
        A `keras.Model`.

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> keras_caps.inference.inference_model(model).output_shape
    (None, 10)
    """
    needed = (roles.CLASS_CAPSULES, roles.LENGTH)
    if reconstruction:
        needed += (roles.MASK, roles.DECODER)
    roles.require_roles(model, needed, "`inference_model`")
    images = roles.image_input(model)
    lengths = model.get_layer(roles.LENGTH).output  # (batch, classes)
    if not reconstruction:
        return keras.Model(images, lengths, name=f"{model.name}_inference")
    # A new call of the mask without labels selects the longest capsules.
    masked = model.get_layer(roles.MASK)(
        model.get_layer(roles.CLASS_CAPSULES).output)
    reconstructed = model.get_layer(roles.DECODER)(masked)
    return keras.Model(
        images, {roles.LENGTH: lengths, roles.RECONSTRUCTION: reconstructed},
        name=f"{model.name}_inference")
