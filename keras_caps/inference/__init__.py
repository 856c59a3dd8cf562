"""Graphs derived from a trained model: inference, serving, credit.

Backend-agnostic Keras transforms of a model built by an application
builder: `inference_model` (images in, no labels), `serving_model` (what
gets exported: that graph with `fold_batch_normalization` applied,
optionally with 16-bit convolutions) and `credit_model` (VectorRouting
credit of each input position). `keras_caps.export` writes them as
SavedModels. `load_model_file` loads a saved `.keras` model with errors
that say what is wrong with the file, and `check_pixel_range` checks
images against the models' input contract (raw pixels in [0, 255]).
`predict_images` classifies image files with a `.keras` model or an
export (`ExportedClassifier`: a SavedModel needs TensorFlow, an ONNX
export ONNX Runtime), printing
the class names kept with the model (`find_class_names`).
`quantize_int8` stores the weights in int8, the capsule layers' vote
kernels included.
"""

from keras_caps.inference.batch_norm_folding import fold_batch_normalization
from keras_caps.inference.class_names import find_class_names
from keras_caps.inference.class_names import read_class_names
from keras_caps.inference.class_names import write_class_names
from keras_caps.inference.credit_model import credit_model
from keras_caps.inference.exported_classifier import ExportedClassifier
from keras_caps.inference.image_prediction import find_image_paths
from keras_caps.inference.image_prediction import predict_images
from keras_caps.inference.inference_model import inference_model
from keras_caps.inference.int8_quantization import quantize_int8
from keras_caps.inference.model_file_loading import load_model_file
from keras_caps.inference.pixel_range import check_pixel_range
from keras_caps.inference.serving_model import SERVING_PRECISIONS
from keras_caps.inference.serving_model import serving_model
