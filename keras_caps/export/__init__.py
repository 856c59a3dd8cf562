"""Export of trained capsule networks for serving: a TensorFlow SavedModel
or an ONNX model (`format="onnx"`, no TensorFlow needed on JAX and
PyTorch)."""

from keras_caps.export.export_support import EXPORT_FORMATS
from keras_caps.export.export_support import check_export_support
from keras_caps.export.saved_model import export_inference_model
