"""Backend-agnostic capsule operations."""

from keras_caps.ops.capsule_ops import SQUASH_VARIANTS
from keras_caps.ops.capsule_ops import at_least_float32
from keras_caps.ops.capsule_ops import capsule_length
from keras_caps.ops.capsule_ops import capsule_votes
from keras_caps.ops.capsule_ops import mask_by_label
from keras_caps.ops.capsule_ops import mask_by_length
from keras_caps.ops.capsule_ops import safe_norm
from keras_caps.ops.capsule_ops import squash
from keras_caps.ops.credit_assignments import compose_credit_assignments
from keras_caps.ops.em_routing import MATRIX_CAPSULE_SIZE
from keras_caps.ops.em_routing import POSE_SIZE
from keras_caps.ops.em_routing import em_inverse_temperatures
from keras_caps.ops.em_routing import em_log_likelihood
from keras_caps.ops.em_routing import em_m_step
from keras_caps.ops.em_routing import fully_connected_em_routing
from keras_caps.ops.em_routing import join_matrix_capsules
from keras_caps.ops.em_routing import split_matrix_capsules
from keras_caps.ops.sparse_couplings import entmax15
from keras_caps.ops.sparse_couplings import gumbel_noise
from keras_caps.ops.sparse_couplings import one_hot_argmax
from keras_caps.ops.sparse_couplings import sparsemax
from keras_caps.ops.sparse_couplings import straight_through_gumbel_softmax
