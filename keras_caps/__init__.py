"""keras_caps: capsule networks for Keras 3."""

from keras_caps import applications
from keras_caps import layers
from keras_caps import losses
from keras_caps import ops
from keras_caps.version import __version__
