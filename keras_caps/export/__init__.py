"""Export of trained capsule networks for serving."""

from keras_caps.export.saved_model import check_export_target
from keras_caps.export.saved_model import export_inference_model
from keras_caps.export.saved_model import is_keras_caps_export
