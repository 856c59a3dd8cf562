"""`CapsuleClassifier` (one stem, any router) and its `CNNBaseline`."""

from keras_caps.applications.capsule_classifier.capsule_classifier import (
    CAPSULE_CLASSIFIER,
)
from keras_caps.applications.capsule_classifier.capsule_classifier import (
    CAPSULE_CLASSIFIERS,
)
from keras_caps.applications.capsule_classifier.capsule_classifier import (
    CapsuleClassifier,
)
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier.cnn_baseline import CNN_BASELINE
from keras_caps.applications.capsule_classifier.cnn_baseline import CNNBaseline
from keras_caps.applications.capsule_classifier.routers import ROUTERS
from keras_caps.applications.capsule_classifier.routers import Router
from keras_caps.applications.capsule_classifier.routers import RouterChoice
