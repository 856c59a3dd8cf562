"""keras_caps: capsule networks for Keras 3.

The backend-agnostic core (`ops`, `layers`, `losses`, `metrics`,
`applications`, `inference`) is imported here. The TensorFlow parts are
imported on demand: `keras_caps.datasets`, `keras_caps.training`,
`keras_caps.export`.
"""

from keras_caps import applications
from keras_caps import inference
from keras_caps import layers
from keras_caps import losses
from keras_caps import metrics
from keras_caps import ops
from keras_caps.version import __version__
