import keras

from keras_caps import layers
from keras_caps import model_roles as roles
from keras_caps.api_export import keras_caps_export
from keras_caps.applications.compiling import builder_docstring
from keras_caps.applications.compiling import compile_model
from keras_caps.applications.compiling import resolve_optimizer
from keras_caps.validation import check_positive_int

# The paper's heads (`RoutingHead` in `models.py` of
# github.com/glassroom/heinsen_routing_2022_paper) route (position x depth)
# to 64 vectors of the backbone's width, then 64 -> 64, then 64 -> one logit
# per class.
_LAYER_NORM_EPSILON = 1e-5


@keras_caps_export("keras_caps.applications.VectorRoutingHead")
@builder_docstring
def VectorRoutingHead(backbone, num_classes, *, hidden_state_layers=None,
                      num_hidden_capsules=64, hidden_capsule_dim=None,
                      num_hidden_routings=2, num_iterations=2, compile=True,
                      optimizer="auto", loss="auto", jit_compile="auto",
                      name="vector_routing_head"):
    """Puts Heinsen's routing classification head on a Keras backbone.

    The head of Heinsen (2022; `RoutingHead` in the paper's code,
    github.com/glassroom/heinsen_routing_2022_paper) routes every position
    of the backbone's output, or of the hidden states of several of its
    layers, to `num_hidden_capsules` hidden vectors, routes those to hidden
    vectors again, and finally to one logit per class:

    ```
    states  = [LayerNorm_k(h_k) for each hidden state k]  # scale 1, bias 0
    x       = concatenate(states, over positions)       # (batch, n, d)
    x       = VectorRouting(64, d)(x)                   # variable n -> 64
    x       = VectorRouting(64, d, num_inputs=64)(x)    # 64 -> 64
    logits  = VectorRouting(num_classes, 1, num_inputs=64)(x)[..., 0]
    ```

    Each hidden state is a sequence `(batch, n, d)` or a feature map
    `(batch, h, w, d)`, whose `h * w` positions are flattened row by row.
    Every state gets its own `LayerNormalization` (epsilon 1e-5, scale
    initialised to ones and bias to zeros: the paper's per-depth
    normalisation without affine followed by a learned scale and bias), and
    all states are concatenated along the positions into one sequence
    (state after state, in the order of `hidden_state_layers`). The first
    routing takes a variable number of inputs, so the backbone should embed
    positions in its states (transformers do), and padded positions are
    ignored: a Keras padding mask on the backbone's outputs (e.g. from an
    `Embedding(mask_zero=True)`) flows through the head into the first
    routing, so results do not depend on the padding.

    The model maps the backbone's inputs to logits `(batch, num_classes)`.
    Each routing also returns its credit assignments, which
    `keras_caps.applications.credit_model(model)` composes into the credit
    of every input position for every class. Layers are named
    `"state_norm_{k}"`, `"positions_{k}"` (feature maps only), `"states"`
    (several states only), `"routing_{k}"`, `"class_routing"` and
    `"logits"`; the class routing and the logits are computed in float32
    under mixed precision.

    The backbone's layers become layers of the returned model and are
    trained with it; set `backbone.trainable = False` first to train the
    head alone, as the paper does.

    Args:
        backbone: A built `keras.Model` (functional or sequential) whose
            output, or whose layers named in `hidden_state_layers`, yield
            sequences `(batch, n, d)` or feature maps `(batch, h, w, d)`.
        num_classes: int. Number of classes, at least 2.
        hidden_state_layers: list of str, or `None`. Names of the backbone
            layers whose outputs are routed, e.g. every transformer block
            (the paper routes the embeddings and all 24 layers). Their last
            dimensions must be equal. Defaults to `None`: the backbone's
            output.
        num_hidden_capsules: int. Number of hidden vectors of each hidden
            routing, at least 2. Defaults to `64`, as in the paper.
        hidden_capsule_dim: int or `None`. Size of the hidden vectors.
            Defaults to `None`: the width `d` of the hidden states, as in
            the paper.
        num_hidden_routings: int. Number of routings to hidden vectors
            before the class routing. Defaults to `2`, as in the paper.
        num_iterations: int. Routing iterations of every routing. Defaults
            to `2`.
        compile: bool. Compile the model. Defaults to `True`.
        optimizer: `"auto"` (Adam, learning rate 1e-3: the paper's peak
            learning rate; it trains with RAdam and a one-cycle schedule)
            or a Keras optimizer.
        loss: `"auto"` or a Keras loss. `"auto"` is the sparse categorical
            cross-entropy on logits, for integer labels, with the metric
            `SparseCategoricalAccuracy(name="accuracy")`, as keras-hub's
            classifiers. For one-hot labels pass
            `keras.losses.CategoricalCrossentropy(from_logits=True)`; a loss
            other than `"auto"` gets the metric `"accuracy"`, which Keras
            matches to the labels.
        jit_compile: {jit_compile}
        name: str. Model name.

    Returns:
        A `keras.Model`, compiled when `compile=True`.

    Example:

    >>> tokens = keras.Input((None,), dtype="int32", name="tokens")
    >>> x = keras.layers.Embedding(100, 16, mask_zero=True,
    ...                            name="embedding")(tokens)
    >>> x = keras.layers.Dense(16, activation="gelu", name="block_1")(x)
    >>> backbone = keras.Model(tokens, x)
    >>> model = keras_caps.applications.VectorRoutingHead(
    ...     backbone, num_classes=3, num_hidden_capsules=8,
    ...     hidden_state_layers=["embedding", "block_1"])
    >>> tuple(model.predict(np.array([[5, 7, 9, 0]]), verbose=0).shape)
    (1, 3)

    Reference:
    - [Heinsen, 2022](https://arxiv.org/abs/2211.11754)
    """
    if not isinstance(backbone, keras.Model):
        raise TypeError(
            "Received an invalid type for `backbone`, expected a "
            "`keras.Model`. Received: "
            f"backbone={backbone!r} of type {type(backbone).__name__}")
    num_classes = check_positive_int("num_classes", num_classes)
    _check_at_least_two("num_classes", num_classes)
    num_hidden_capsules = check_positive_int("num_hidden_capsules",
                                             num_hidden_capsules)
    _check_at_least_two("num_hidden_capsules", num_hidden_capsules)
    if hidden_capsule_dim is not None:
        hidden_capsule_dim = check_positive_int("hidden_capsule_dim",
                                                hidden_capsule_dim)
    num_hidden_routings = check_positive_int("num_hidden_routings",
                                             num_hidden_routings)
    num_iterations = check_positive_int("num_iterations", num_iterations)
    states = _hidden_states(backbone, hidden_state_layers)
    width = states[0].shape[-1]
    hidden_capsule_dim = hidden_capsule_dim or width

    # === Layers and functional model ===
    x = _normalized_positions(states, width)  # (batch, positions, width)
    for index in range(1, num_hidden_routings + 1):
        x, _ = layers.VectorRouting(
            num_hidden_capsules, hidden_capsule_dim,
            num_inputs=None if index == 1 else num_hidden_capsules,
            num_iterations=num_iterations, name=f"routing_{index}")(
                x, return_credit=True)
    x, _ = layers.VectorRouting(
        num_classes, 1, num_inputs=num_hidden_capsules,
        num_iterations=num_iterations, dtype="float32",
        name=roles.CLASS_ROUTING)(x, return_credit=True)
    logits = keras.layers.Reshape((num_classes,), dtype="float32",
                                  name=roles.LOGITS)(x)
    model = keras.Model(backbone.input, logits, name=name)

    if compile:
        _compile_head(model, optimizer, loss, jit_compile)
    return model


def _normalized_positions(states, width):
    """Each hidden state LayerNormed, feature maps flattened row by row,
    all concatenated along the positions: `(batch, positions, width)`."""
    sequences = []
    for index, state in enumerate(states, start=1):
        x = keras.layers.LayerNormalization(
            epsilon=_LAYER_NORM_EPSILON, name=f"state_norm_{index}")(state)
        if len(state.shape) == 4:
            x = keras.layers.Reshape((-1, width),
                                     name=f"positions_{index}")(x)
        sequences.append(x)
    if len(sequences) > 1:
        return keras.layers.Concatenate(axis=1, name="states")(sequences)
    return sequences[0]


def _compile_head(model, optimizer, loss, jit_compile):
    """Adam (1e-3) unless given; `"auto"`: the sparse cross-entropy on
    logits with the sparse accuracy, else `loss` with `"accuracy"`."""
    optimizer = resolve_optimizer(
        optimizer, lambda: keras.optimizers.Adam(learning_rate=1e-3))
    if loss == "auto":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    else:
        metrics = ["accuracy"]
    compile_model(model, optimizer, loss=loss, metrics=metrics,
                  jit_compile=jit_compile)


def _check_at_least_two(name, value):
    if value < 2:
        raise ValueError(
            f"Received an invalid value for `{name}`, expected an integer "
            "of at least 2 (a routing's outputs compete for each input's "
            f"data). Received: {name}={value!r}")


def _hidden_states(backbone, hidden_state_layers):
    """The backbone tensors to route, checked: rank 3 or 4, equal widths."""
    try:
        outputs = backbone.outputs
    except (AttributeError, ValueError):
        outputs = None
    if not outputs:
        raise ValueError(
            "`backbone` must be a built functional or sequential model with "
            "symbolic inputs and outputs. Received: "
            f"backbone={backbone.name!r} without symbolic outputs")
    if hidden_state_layers is None:
        if len(outputs) != 1:
            raise ValueError(
                "`backbone` has several outputs; name the layers to route "
                "in `hidden_state_layers`. Received: backbone outputs of "
                f"shapes {[tuple(x.shape) for x in outputs]}")
        states = list(outputs)
        described = "the output of `backbone`"
    else:
        if (isinstance(hidden_state_layers, str)
                or not isinstance(hidden_state_layers, (list, tuple))
                or not hidden_state_layers):
            raise TypeError(
                "Received an invalid type for `hidden_state_layers`, "
                "expected a non-empty list of layer names. Received: "
                f"hidden_state_layers={hidden_state_layers!r}")
        names = [layer.name for layer in backbone.layers]
        unknown = [name for name in hidden_state_layers if name not in names]
        if unknown:
            raise ValueError(
                f"`backbone` has no layers named {unknown}. Its layers: "
                f"{names}. Received: "
                f"hidden_state_layers={list(hidden_state_layers)!r}")
        states = [backbone.get_layer(name).output
                  for name in hidden_state_layers]
        described = "`hidden_state_layers`"
    shapes = [tuple(state.shape) if hasattr(state, "shape") else state
              for state in states]
    if any(not hasattr(state, "shape") or len(state.shape) not in (3, 4)
           for state in states):
        raise ValueError(
            f"{described} must be sequences (batch, n, d) or feature maps "
            "(batch, h, w, d), one tensor per layer. Received: "
            f"shapes={shapes}")
    widths = {state.shape[-1] for state in states}
    if len(widths) != 1 or None in widths:
        raise ValueError(
            f"{described} must share one known last dimension d, as they "
            f"are routed as one sequence. Received: shapes={shapes}")
    return states
