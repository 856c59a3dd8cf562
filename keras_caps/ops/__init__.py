"""Backend-agnostic capsule operations."""

from keras_caps.ops.capsule_ops import SQUASH_VARIANTS
from keras_caps.ops.capsule_ops import at_least_float32
from keras_caps.ops.capsule_ops import capsule_length
from keras_caps.ops.capsule_ops import mask_by_label
from keras_caps.ops.capsule_ops import mask_by_length
from keras_caps.ops.capsule_ops import safe_norm
from keras_caps.ops.capsule_ops import squash
from keras_caps.ops.credit_assignments import compose_credit_assignments
