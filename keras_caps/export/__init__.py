"""Export of trained capsule networks for serving: a TensorFlow SavedModel,
an ONNX model (`format="onnx"`, no TensorFlow needed on JAX and PyTorch),
a LiteRT model (`format="litert"`, with 8-bit weights for
`quantize="int8"`) or an OpenVINO model (`format="openvino"`)."""

from keras_caps.export.export_support import EXPORT_FORMATS
from keras_caps.export.export_support import check_export_support
from keras_caps.export.export_support import check_quantize
from keras_caps.export.saved_model import export_inference_model
