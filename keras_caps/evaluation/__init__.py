"""Robustness evaluations of a trained model.

`corruptions` (NumPy only: noise, pixel corruption, occlusion and the
generated affine test set) is imported here; `robustness` (a saved model
on clean and corrupted test data) is imported on first use, as is
`attacks` (FGSM, PGD and the vote attack, on any Keras backend). The
comparison behind `keras-caps compare` is `keras_caps.compare`.
"""

import importlib

from keras_caps.evaluation import corruptions

_LAZY_MODULES = ("robustness", "predictions",
                 "batchnorm_adaptation", "attacks")
_LAZY_FUNCTIONS = {"evaluate_robustness": "robustness",
                   "read_predictions": "predictions",
                   "adversarial_images": "attacks",
                   "attack_accuracy": "attacks"}


def __getattr__(name):
    if name in _LAZY_MODULES:
        return importlib.import_module(f"keras_caps.evaluation.{name}")
    if name in _LAZY_FUNCTIONS:
        module = importlib.import_module(
            f"keras_caps.evaluation.{_LAZY_FUNCTIONS[name]}")
        return getattr(module, name)
    raise AttributeError(
        f"module 'keras_caps.evaluation' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY_MODULES)
                  + list(_LAZY_FUNCTIONS))
