"""Robustness evaluations of a trained model.

`corruptions` (noise, pixel corruption, occlusion and the generated affine
test set, NumPy only), `robustness` (a saved model on clean and corrupted
test data: `evaluate_robustness`), `predictions` (the per-image records:
`read_predictions`), `batchnorm_adaptation` and `attacks` (FGSM, PGD and
the vote attack, on any Keras backend: `adversarial_images`,
`attack_accuracy`). The comparison behind `keras-caps compare` is
`keras_caps.compare`.
"""

from keras_caps.evaluation import attacks
from keras_caps.evaluation import batchnorm_adaptation
from keras_caps.evaluation import corruptions
from keras_caps.evaluation import predictions
from keras_caps.evaluation import robustness
from keras_caps.evaluation.attacks import adversarial_images
from keras_caps.evaluation.attacks import attack_accuracy
from keras_caps.evaluation.predictions import read_predictions
from keras_caps.evaluation.robustness import evaluate_robustness
