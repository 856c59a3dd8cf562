"""The original CapsNet (Sabour et al., 2017): builder, presets and family."""

from keras_caps.applications.capsnet.capsnet import CAPSNET
from keras_caps.applications.capsnet.capsnet import CapsNet
from keras_caps.applications.capsnet.capsnet import dataset_options
from keras_caps.applications.capsnet.capsnet import get_preset
from keras_caps.applications.capsnet.capsnet import learning_rate_schedule
from keras_caps.applications.capsnet.capsnet_presets import CAPSNET_PRESETS
