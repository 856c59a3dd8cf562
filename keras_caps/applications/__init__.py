"""Capsule-network applications: model families that build compiled models.

Each family has a folder with its builder and presets, and a `ModelFamily`
(e.g. `EFFICIENT_CAPSNET`) that holds what `keras-caps train` needs;
`MODELS` (`model_registry`) names every model once, for every command. The
shared pieces builders use: `capsule_head` (lengths, masks, decoder and
compiling), `decoders`, `image_inputs`, `presets` (lookup and learning-rate
schedules), `compiling`. `load_official_weights` (`official_weights`)
reads the official Efficient-CapsNet repository's HDF5 weight files. The
transforms of a trained model (`inference_model`, `serving_model`,
`fold_batch_normalization`, `credit_model`) live in `keras_caps.inference`
and are re-exported here.
"""

from keras_caps.applications.capsnet import CAPSNET
from keras_caps.applications.capsnet import CAPSNET_PRESETS
from keras_caps.applications.capsnet import CapsNet
from keras_caps.applications.capsule_classifier import CAPSULE_CLASSIFIER
from keras_caps.applications.capsule_classifier import CNN_BASELINE
from keras_caps.applications.capsule_classifier import POSITION_CNN
from keras_caps.applications.capsule_classifier import SABOUR_BASELINE_CNN
from keras_caps.applications.capsule_classifier import (
    SABOUR_BASELINE_CNN_PRESETS,
)
from keras_caps.applications.capsule_classifier import VECTOR_CNN
from keras_caps.applications.capsule_classifier import VECTOR_CNN_DECODER
from keras_caps.applications.capsule_classifier import CapsuleClassifier
from keras_caps.applications.capsule_classifier import CNNBaseline
from keras_caps.applications.capsule_classifier import PositionCNN
from keras_caps.applications.capsule_classifier import SabourBaselineCNN
from keras_caps.applications.capsule_classifier import VectorCNN
from keras_caps.applications.efficient_capsnet import EFFICIENT_CAPSNET
from keras_caps.applications.efficient_capsnet import EFFICIENT_CAPSNET_PRESETS
from keras_caps.applications.efficient_capsnet import EfficientCapsNet
from keras_caps.applications.inverted_attention_capsnet import (
    INVERTED_ATTENTION_CAPSNET,
)
from keras_caps.applications.inverted_attention_capsnet import (
    INVERTED_ATTENTION_CAPSNET_PRESETS,
)
from keras_caps.applications.inverted_attention_capsnet import (
    InvertedAttentionCapsNet,
)
from keras_caps.applications.matrix_capsnet import MATRIX_CAPSNET
from keras_caps.applications.matrix_capsnet import MATRIX_CAPSNET_PRESETS
from keras_caps.applications.matrix_capsnet import MatrixCapsNet
from keras_caps.applications.model_family import ModelFamily
from keras_caps.applications.model_registry import MODEL_KINDS
from keras_caps.applications.model_registry import MODELS
from keras_caps.applications.model_registry import RegisteredModel
from keras_caps.applications.model_registry import check_model_name
from keras_caps.applications.model_registry import current_model_name
from keras_caps.applications.model_registry import renamed_model
from keras_caps.applications.official_weights import load_official_weights
from keras_caps.applications.vector_routing_capsnet import (
    VECTOR_ROUTING_CAPSNET,
)
from keras_caps.applications.vector_routing_capsnet import (
    VECTOR_ROUTING_CAPSNET_PRESETS,
)
from keras_caps.applications.vector_routing_capsnet import VectorRoutingCapsNet
from keras_caps.applications.vector_routing_head import VectorRoutingHead
from keras_caps.inference import SERVING_PRECISIONS
from keras_caps.inference import credit_model
from keras_caps.inference import fold_batch_normalization
from keras_caps.inference import inference_model
from keras_caps.inference import serving_model
