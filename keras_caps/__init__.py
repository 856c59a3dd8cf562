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

from keras_caps.keras_import import import_keras

# Before the subpackages import Keras: a backend that is not installed is
# one clear error, not one from deep inside Keras' import.
import_keras()

from keras_caps import applications  # noqa: E402
from keras_caps import callbacks  # noqa: E402
from keras_caps import diagnostics  # noqa: E402
from keras_caps import inference  # noqa: E402
from keras_caps import layers  # noqa: E402
from keras_caps import losses  # noqa: E402
from keras_caps import metrics  # noqa: E402
from keras_caps import model_roles  # noqa: E402
from keras_caps import ops  # noqa: E402
from keras_caps import schedules  # noqa: E402
from keras_caps.version import __version__  # noqa: E402

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
