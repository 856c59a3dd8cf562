"""`CapsuleClassifier` (one stem, any router), its `CNNBaseline` and the
controls: the CNN ladder (`PositionCNN`, `VectorCNN`) and
`SabourBaselineCNN`."""

from keras_caps.applications.capsule_classifier.capsule_classifier import (
    CAPSULE_CLASSIFIER,
)
from keras_caps.applications.capsule_classifier.capsule_classifier import (
    CapsuleClassifier,
)
from keras_caps.applications.capsule_classifier.capsule_classifier_presets import (  # noqa: E501
    CAPSULE_CLASSIFIER_PRESETS,
)
from keras_caps.applications.capsule_classifier.cnn_baseline import CNN_BASELINE
from keras_caps.applications.capsule_classifier.cnn_baseline import CNNBaseline
from keras_caps.applications.capsule_classifier.position_cnn import POSITION_CNN
from keras_caps.applications.capsule_classifier.position_cnn import PositionCNN
from keras_caps.applications.capsule_classifier.routers import ROUTERS
from keras_caps.applications.capsule_classifier.routers import RouterChoice
from keras_caps.applications.capsule_classifier.sabour_baseline_cnn import (
    SABOUR_BASELINE_CNN,
)
from keras_caps.applications.capsule_classifier.sabour_baseline_cnn import (
    SABOUR_BASELINE_CNN_PRESETS,
)
from keras_caps.applications.capsule_classifier.sabour_baseline_cnn import (
    SabourBaselineCNN,
)
from keras_caps.applications.capsule_classifier.vector_cnn import VECTOR_CNN
from keras_caps.applications.capsule_classifier.vector_cnn import (
    VECTOR_CNN_DECODER,
)
from keras_caps.applications.capsule_classifier.vector_cnn import VectorCNN
