import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.inference.batch_norm_folding import fold_batch_normalization
from keras_caps.inference.inference_model import inference_model
from keras_caps.inference.model_rebuilding import as_functional
from keras_caps.inference.model_rebuilding import rebuild_model
from keras_caps.validation import check_bool
from keras_caps.validation import check_choice

SERVING_PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")

_CONVOLUTIONAL_LAYERS = (
    keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D,
    keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D,
    keras.layers.SeparableConv1D, keras.layers.SeparableConv2D,
    layers.PrimaryCaps, layers.ConvPrimaryCaps,
)


@keras_caps_export("keras_caps.inference.serving_model")
def serving_model(model, reconstruction=False, precision=None):
    """The model that gets exported: images in, optimised for inference.

    Takes the inference graph of `model` (see `inference_model`), folds its
    batch normalisations into the following convolutions (see
    `fold_batch_normalization`) and optionally changes the precision the
    convolutions compute in. The result is an independent copy: training
    `model` further does not change it.

    Folding gives the same float32 scores (up to rounding) with less work
    per image, so inference is faster; `precision="mixed_bfloat16"` is
    faster again on CPUs with bfloat16 dot-product instructions
    (AVX512_BF16, AMX) and on accelerators. The README's "Exporting and
    serving" and "Speed" sections give measured figures, and
    `benchmarks/serving_precision.py` measures a trained model's test error
    and speed in each precision. Reduced precision changes the scores
    slightly: check the accuracy on your own validation data.

    Args:
        model: A model from an application builder, or its inference model.
        reconstruction: bool. Also return the reconstruction from the
            longest class capsule(s). Defaults to `False`.
        precision: `None` (keep each layer's dtype policy), `"float32"` (the
            whole model in float32), or `"mixed_bfloat16"` /
            `"mixed_float16"`: the convolutional layers (convolutions,
            `PrimaryCaps`, `ConvPrimaryCaps`), which do nearly all of the
            arithmetic, compute in 16 bits with float32 weights; the capsule
            routing, lengths and decoder keep their policy.

    Returns:
        A `keras.Model` mapping raw images to class scores (or to
        `{"length": ..., "reconstruction": ...}`).

    Example:

    >>> model = keras_caps.applications.EfficientCapsNet("mnist")
    >>> server = keras_caps.inference.serving_model(model)
    >>> "batch_norm_1" in [layer.name for layer in server.layers]
    False
    >>> server.output_shape
    (None, 10)
    """
    check_bool("reconstruction", reconstruction)
    if precision is not None:
        check_choice("precision", precision, SERVING_PRECISIONS)
    names = ({layer.name for layer in model.layers}
             if isinstance(model, keras.Model) else set())
    if reconstruction and not {roles.MASK, roles.DECODER} <= names:
        raise ValueError(
            "`reconstruction=True` needs a model with a reconstruction "
            f"decoder (layers named {roles.MASK!r} and {roles.DECODER!r}), "
            "and this one has none: it was built or trained without "
            "reconstruction, or its family has no decoder. Export it "
            "without reconstruction. "
            f"Received: a model named {getattr(model, 'name', model)!r}")
    if names & {roles.LABEL, roles.MASK}:  # Drop the label input.
        model = inference_model(model, reconstruction=reconstruction)
    model = fold_batch_normalization(model)
    if precision is None:
        return model
    model, config = as_functional(model)
    for entry in config["layers"]:
        layer = model.get_layer(entry["name"])
        if precision == "float32" or isinstance(layer, _CONVOLUTIONAL_LAYERS):
            if entry["class_name"] != "InputLayer":
                entry["config"]["dtype"] = precision
    return rebuild_model(config, {layer.name: layer.get_weights()
                                  for layer in model.layers})
