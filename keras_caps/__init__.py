"""keras_caps: capsule networks for Keras 3.

The backend-agnostic core (`ops`, `layers`, `losses`, `metrics`,
`callbacks`, `schedules`, `applications`, `inference`, `diagnostics`,
and `model_roles`, the names of the layers integrations look up) is
imported here. The parts that need TensorFlow or matplotlib
(`keras_caps.datasets`, `keras_caps.training`, `keras_caps.export`,
`keras_caps.visualization`, `keras_caps.evaluation`) are imported on
first attribute access, so `import keras_caps` on the JAX backend imports
no TensorFlow.
"""

import importlib

from keras_caps import applications
from keras_caps import callbacks
from keras_caps import diagnostics
from keras_caps import inference
from keras_caps import layers
from keras_caps import losses
from keras_caps import metrics
from keras_caps import model_roles
from keras_caps import ops
from keras_caps import schedules
from keras_caps.version import __version__

_LAZY_SUBPACKAGES = ("datasets", "evaluation", "export", "training",
                     "visualization")


def __getattr__(name):
    if name in _LAZY_SUBPACKAGES:
        # import_module also binds the subpackage as an attribute of this
        # package, so this runs once per subpackage.
        return importlib.import_module(f"keras_caps.{name}")
    raise AttributeError(f"module 'keras_caps' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBPACKAGES))
