"""A vector-routing classifier (Heinsen, 2022): builder, presets, family."""

from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet import (  # noqa: E501
    VECTOR_ROUTING_CAPSNET,
)
from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet import (  # noqa: E501
    VectorRoutingCapsNet,
)
from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet import (  # noqa: E501
    get_preset,
)
from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet import (  # noqa: E501
    learning_rate_schedule,
)
from keras_caps.applications.vector_routing_capsnet.vector_routing_capsnet_presets import (  # noqa: E501
    VECTOR_ROUTING_CAPSNET_PRESETS,
)
