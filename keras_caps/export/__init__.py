"""Export of trained capsule networks for serving."""

from keras_caps.export.saved_model import export_inference_model
