"""Matrix capsules with EM routing (Hinton et al., 2018): builder, presets
and family."""

from keras_caps.applications.matrix_capsnet.matrix_capsnet import MATRIX_CAPSNET
from keras_caps.applications.matrix_capsnet.matrix_capsnet import MatrixCapsNet
from keras_caps.applications.matrix_capsnet.matrix_capsnet import get_preset
from keras_caps.applications.matrix_capsnet.matrix_capsnet import (
    recipe_callbacks,
)
from keras_caps.applications.matrix_capsnet.matrix_capsnet_presets import (
    MATRIX_CAPSNET_PRESETS,
)
