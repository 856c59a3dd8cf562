"""The base class every routing layer shares."""

import numbers

import keras
from keras import ops

from keras_caps.api_export import keras_caps_export
from keras_caps.layers.int8_kernels import Int8Kernels
from keras_caps.ops import capsule_ops
from keras_caps.ops import sparse_couplings
from keras_caps.validation import check_choice
from keras_caps.validation import check_positive_int
from keras_caps.validation import check_temperature

# The couplings layout, `(batch, heads, children, parents)` for every router:
# the `couplings_layout` config entry of the routers that had another one
# before the router contract (see `Router.keys_since_contract`).
COUPLINGS_LAYOUT = "unified"
# The functions that turn tempered routing logits into couplings, for the
# routers that offer them (`Router.coupling_options`).
COUPLINGS = ("softmax", "sparsemax", "entmax15", "sigmoid", "gumbel_softmax")
# What `coupling="gumbel_softmax"` does outside training.
GUMBEL_INFERENCES = ("argmax", "softmax")
# The end of the line refusing a file saved before the router contract.
_NOT_LOADED = ("keras_caps 0.2.0 does not load such files: build the model "
               "with keras_caps 0.2.0 and train it again.")


@keras_caps_export("keras_caps.layers.Router")
class Router(Int8Kernels, keras.layers.Layer):
    """Base class of routing layers: the temperature, couplings and trace.

    A router maps child capsules to parent capsules through couplings, a
    probability over parents (or children) per child–parent pair, from a
    tempered softmax of agreement logits:

    ```
    couplings = softmax(agreement / max(temperature, MIN_TEMPERATURE))
    ```

    The base class owns what every router shares, so a new router writes
    only its maths:

    - the routing **temperature**: a validated float argument, held after
      `build` in a non-trainable float32 variable (a callback can anneal it
      during `fit` without retracing) and in the config;
    - the **couplings output**: `layer(x, return_couplings=True)` returns
      `(outputs, couplings)` with couplings of shape `(batch, heads,
      children, parents)` (`heads = 1` for single-head routers) that sum to
      1 over the axis named by `normalization_axis`;
    - `routing_trace(x)`: the couplings and agreement logits of every
      routing pass, float32, in the same layout;
    - the output spec, so the layer works on symbolic inputs;
    - refusing, with one line naming what wrote it, a config or weights
      saved by keras_caps 0.1.0 before the router contract (see
      `keys_since_contract`).

    Numerics follow one rule: agreements, logits and softmaxes are
    computed in float32 under mixed precision (cast the result back to the
    compute dtype), and the temperature divides them no lower than
    `MIN_TEMPERATURE`, so the gradient through a near-hard routing is at
    most `1 / MIN_TEMPERATURE` times the logits' and stays finite in
    float16.

    A subclass implements:

    - `build_router(input_shape)`: its weights (the base `build` calls it,
      then adds the temperature last; a subclass that overrides `build`
      calls `super().build(input_shape)`);
    - `compute_routing(inputs, keep_passes=False)`: returns a
      `RoutingPasses` with the outputs and, per pass, the couplings and
      agreement in the layout above (only the last pass unless
      `keep_passes`); use `self.tempered_softmax(logits, axis)`, or, in
      a router that offers other couplings (`coupling_options`, below),
      `self.normalize_couplings(logits, axis, training)` with the
      `training` argument that `call` then passes to `compute_routing`;
    - `compute_output_shape(input_shape)` and
      `compute_couplings_shape(input_shape)`;
    - `get_config()` with its own arguments (the base adds
      `num_capsules`, `capsule_dim` and `temperature`);
    - `multiply_adds(input_shape)`: the multiply–adds of routing one
      example, counted from its paper's equations (the convention is
      `Router.multiply_adds`'s).

    Routers with `coupling_options` beyond `"softmax"` (`DynamicRouting`,
    `HybridRouting`, `AttentionRouting`) replace the softmax with the
    function named by `coupling`, always of `logits / temperature`:
    `"sparsemax"` and `"entmax15"` (sparse probabilities with exact
    zeros), `"sigmoid"` (independent gates in (0, 1) that do not sum to 1:
    `couplings_normalized` is then `False`) and `"gumbel_softmax"` (a
    one-hot sample while training, straight-through, see
    `normalize_couplings`).

    Args:
        num_capsules: int. Number of parent capsules (per position for a
            convolutional router).
        capsule_dim: int. Dimension of each parent capsule.
        temperature: float. The routing temperature, above 0. Defaults to
            `1.0` (the router's paper). Values below `MIN_TEMPERATURE`
            are kept (and reported by `temperature`) but route as
            `MIN_TEMPERATURE`.
        coupling: str. One of the router's `coupling_options`: `"softmax"`
            (the default), `"sparsemax"`, `"entmax15"`, `"sigmoid"` or
            `"gumbel_softmax"`.
        gumbel_inference: str. What `coupling="gumbel_softmax"` gives
            outside training: `"argmax"` (the default: the one-hot of the
            largest logit, as the samples seen in training; ties go to the
            first parent) or `"softmax"` (the tempered softmax).
        seed: int or `None`. Seed of the Gumbel noise, held by the layer
            in a `keras.random.SeedGenerator`. Defaults to `None`.
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.

    Example:

    >>> layer = keras_caps.layers.FCCaps(num_capsules=3, capsule_dim=4)
    >>> isinstance(layer, keras_caps.layers.Router)
    True
    >>> outputs, couplings = layer(np.ones((2, 5, 8)), return_couplings=True)
    >>> tuple(couplings.shape)  # (batch, heads, children, parents)
    (2, 1, 5, 3)
    """

    #: The smallest temperature the softmax divides by.
    MIN_TEMPERATURE = 1e-3
    #: The couplings axis that sums to 1: `"parents"` (axis 3, each child
    #: splits itself between the parents) or `"children"` (axis 2).
    normalization_axis = "parents"
    #: For a router that existed before the router contract (keras_caps
    #: 0.1.0): the config entries every config saved since holds and one
    #: saved before lacks, `"temperature"` (added first) and, for a router
    #: whose couplings had another layout then, `"couplings_layout"`
    #: (`get_config` writes it). `from_config` refuses a config without
    #: one of them. Routers added since leave it empty.
    keys_since_contract = ()
    #: The `coupling` choices the router offers. A router offering more
    #: than `"softmax"` normalises with `normalize_couplings` and takes
    #: `training` in `compute_routing`.
    coupling_options = ("softmax",)
    #: The squash (a `variant` of `keras_caps.ops.squash`) that makes the
    #: parent capsules from the couplings-weighted sum of one vote per
    #: child and parent, or `None` for a router whose parents are not such
    #: sums (their lengths are activations, or there is no vote per child
    #: and parent). The vote attack (Gu, Wu & Tresp 2021, section 3)
    #: squashes each parent's mean vote with it.
    vote_squash = None

    def __init__(self, num_capsules, capsule_dim, temperature=1.0,
                 coupling="softmax", gumbel_inference="argmax", seed=None,
                 **kwargs):
        num_capsules = check_positive_int("num_capsules", num_capsules)
        capsule_dim = check_positive_int("capsule_dim", capsule_dim)
        initial_temperature = check_temperature("temperature", temperature)
        check_choice("coupling", coupling, self.coupling_options)
        check_choice("gumbel_inference", gumbel_inference, GUMBEL_INFERENCES)
        seed = _check_seed(seed)
        super().__init__(**kwargs)
        self.num_capsules = num_capsules
        self.capsule_dim = capsule_dim
        self._initial_temperature = initial_temperature
        self._temperature = None
        self.coupling = coupling
        self.gumbel_inference = gumbel_inference
        self.seed = seed
        self.seed_generator = (keras.random.SeedGenerator(seed)
                               if coupling == "gumbel_softmax" else None)

    # --- Building --------------------------------------------------------

    def build(self, input_shape):
        self.build_router(input_shape)
        # Last of the layer's own weights (files of keras_caps 0.1.0 hold
        # all the others, and are refused: see `load_own_variables`).
        self._temperature = self.add_weight(
            name="temperature", shape=(),
            initializer=keras.initializers.Constant(
                self._initial_temperature),
            dtype="float32", trainable=False, autocast=False)
        if self.quantization_mode == "int8":  # A quantized `.keras` file.
            self.build_int8_kernels()

    def build_router(self, input_shape):
        """Creates the router's weights (everything but the temperature)."""
        raise NotImplementedError(
            f"`{type(self).__name__}` must implement `build_router`.")

    # --- The temperature -------------------------------------------------

    @property
    def temperature(self):
        """The current routing temperature, a Python float."""
        if self._temperature is None:
            return self._initial_temperature
        return float(ops.convert_to_numpy(self._temperature))

    @temperature.setter
    def temperature(self, value):
        value = check_temperature("temperature", value)
        if self._temperature is None:
            self._initial_temperature = value
        else:
            self._temperature.assign(value)

    @property
    def temperature_variable(self):
        """The float32 variable holding the temperature (after `build`)."""
        return self._temperature

    def tempered_softmax(self, logits, axis):
        """`softmax(logits / temperature)` over `axis`, in float32.

        The logits are shifted by their (gradient-free) maximum first, so a
        tiny temperature gives one-hot couplings instead of `inf - inf`;
        with temperature 1 this equals `softmax(logits)` (over an inner
        axis up to rounding: it is written out there, see below).
        """
        logits = capsule_ops.at_least_float32(logits)
        shift = ops.stop_gradient(ops.max(logits, axis=axis, keepdims=True))
        tempered = self.temper(logits - shift)  # <= 0
        if axis in (-1, len(logits.shape) - 1):
            return ops.softmax(tempered, axis=axis)
        # Over an inner axis, written out: TensorFlow's softmax moves the
        # axis last and back (two transposes, forward and backward). The
        # sum is at least 1 (the maximum's exp(0)), so its reciprocal is
        # finite, and a product's gradient is cheaper than a quotient's.
        exponentials = ops.exp(tempered)
        return exponentials * (1.0 / ops.sum(exponentials, axis=axis,
                                             keepdims=True))

    @property
    def offers_couplings(self):
        """Whether the router offers `coupling` choices beyond softmax."""
        return len(self.coupling_options) > 1

    @property
    def couplings_normalized(self):
        """Whether the couplings sum to 1 over `normalization_axis`.

        `False` for `coupling="sigmoid"`, whose gates are independent.
        """
        return self.coupling != "sigmoid"

    def normalize_couplings(self, logits, axis, training=None):
        """The couplings of `logits` over `axis`, by `coupling`, in float32.

        Every choice acts on `scores = logits / temperature` (shifted by
        the gradient-free maximum where the function is shift-invariant):

        - `"softmax"`: `tempered_softmax(logits, axis)`, unchanged;
        - `"sparsemax"`, `"entmax15"`: `keras_caps.ops.sparsemax` or
          `keras_caps.ops.entmax15` of the scores (exact zeros);
        - `"sigmoid"`: `sigmoid(scores)`, not normalised;
        - `"gumbel_softmax"`: while training, the one-hot
          `argmax(scores + g)` for Gumbel noise `g`, whose gradient is the
          gradient of `softmax(scores + g)` (straight-through,
          `keras_caps.ops.straight_through_gumbel_softmax`): the sample
          picks a parent with the softmax coupling's probability. Outside
          training, by `gumbel_inference`: the one-hot of
          `argmax(scores)` or `softmax(scores)`.
        """
        if self.coupling == "softmax":
            return self.tempered_softmax(logits, axis)
        logits = capsule_ops.at_least_float32(logits)
        if self.coupling == "sigmoid":
            return ops.sigmoid(self.temper(logits))
        shift = ops.stop_gradient(ops.max(logits, axis=axis, keepdims=True))
        scores = self.temper(logits - shift)
        if self.coupling == "sparsemax":
            return sparse_couplings.sparsemax(scores, axis=axis)
        if self.coupling == "entmax15":
            return sparse_couplings.entmax15(scores, axis=axis)
        if training:
            return sparse_couplings.straight_through_gumbel_softmax(
                scores, axis=axis, seed=self.seed_generator)
        if self.gumbel_inference == "softmax":
            return ops.softmax(scores, axis=axis)
        return sparse_couplings.one_hot_argmax(scores, axis=axis)

    def temper(self, shifted_logits):
        """`shifted_logits / temperature` for float32 logits.

        The logits are usually shifted to <= 0 first. For routers that
        write their own (e.g. masked) softmax.
        """
        if self._temperature is None:
            raise ValueError(
                f"`{type(self).__name__}` {self.name!r} routes before its "
                "temperature exists: call the layer (or `build` it) first.")
        temperature = ops.maximum(self._temperature, self.MIN_TEMPERATURE)
        # One scalar division; the product's gradient is cheaper.
        return shifted_logits * ops.cast(1.0 / temperature,
                                         shifted_logits.dtype)

    # --- Calling ---------------------------------------------------------

    def call(self, inputs, return_couplings=False, training=None):
        if self.offers_couplings:
            passes = self.compute_routing(inputs, training=training)
        else:
            passes = self.compute_routing(inputs)
        return self.routing_outputs(passes, return_couplings)

    def compute_routing(self, inputs, keep_passes=False):
        """The router's maths: a `RoutingPasses` (see the class docstring)."""
        raise NotImplementedError(
            f"`{type(self).__name__}` must implement `compute_routing`.")

    def routing_outputs(self, passes, return_couplings):
        """What `call` returns: the outputs, and the last couplings if asked."""
        if not return_couplings:
            return passes.outputs
        couplings = passes.couplings[-1]
        return passes.outputs, ops.cast(couplings, passes.outputs.dtype)

    def routing_trace(self, inputs, **call_kwargs):
        """Every routing pass, for diagnostics.

        Args:
            inputs: As for `call`.
            **call_kwargs: The router's other call arguments (masks;
                `training` for a router with `coupling_options`, e.g. the
                Gumbel samples of `training=True`).

        Returns:
            A dict with `"couplings"` and `"agreement"`, lists with one
            float32 `(batch, heads, children, parents)` tensor per pass
            (the agreement is the logits the tempered softmax normalises;
            zeros for a uniform pass), `"parents"`, each pass's outputs,
            and `"votes"`, what each child proposes to each parent
            `(batch, children, parents, dim)`, where the router has such
            votes (else `None`).
        """
        if not self.built:
            raise ValueError(
                f"`routing_trace` needs a built `{type(self).__name__}`: "
                "call the layer on inputs (or `build` it) first.")
        inputs = keras.tree.map_structure(
            lambda tensor: ops.convert_to_tensor(tensor, self.compute_dtype),
            inputs)
        passes = self.compute_routing(inputs, keep_passes=True, **call_kwargs)
        return passes.as_trace()

    # --- Shapes ----------------------------------------------------------

    def compute_couplings_shape(self, input_shape):
        """The couplings shape `(batch, heads, children, parents)`."""
        raise NotImplementedError(
            f"`{type(self).__name__}` must implement "
            "`compute_couplings_shape`.")

    def couplings_grid(self, input_shape):
        """`None`, or the `(rows, columns)` of a convolutional router.

        A convolutional router's children axis holds one block of window
        children per output position, positions in row-major order; a
        fully connected router returns `None`.
        """
        return None

    def compute_output_spec(self, inputs, return_couplings=False,
                            **call_kwargs):
        input_shape = _shape_of(inputs)
        outputs = keras.KerasTensor(self.compute_output_shape(input_shape),
                                    dtype=self.compute_dtype)
        if not return_couplings:
            return outputs
        shape = self.compute_couplings_shape(input_shape)
        return outputs, keras.KerasTensor(shape, dtype=self.compute_dtype)

    # --- Saving ----------------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.update({"num_capsules": self.num_capsules,
                       "capsule_dim": self.capsule_dim,
                       "temperature": self.temperature})
        if "couplings_layout" in self.keys_since_contract:
            config["couplings_layout"] = COUPLINGS_LAYOUT
        if self.offers_couplings:
            config.update({"coupling": self.coupling,
                           "gumbel_inference": self.gumbel_inference,
                           "seed": self.seed})
        return config

    @classmethod
    def from_config(cls, config):
        """As `Layer.from_config`; refuses a config of keras_caps 0.1.0.

        Raises:
            ValueError: the config was saved before the router contract:
                it lacks one of `keys_since_contract`, or holds
                `couplings_layout="legacy"` (the old layout, kept when a
                file saved before the contract was saved again).
        """
        _check_saved_since_contract(cls, config)
        config = {key: value for key, value in config.items()
                  if key != "couplings_layout"}
        return super().from_config(config)

    def load_own_variables(self, store):
        """As `Layer.load_own_variables`; refuses weights of keras_caps 0.1.0.

        A router that existed before its temperature saved every own
        variable but the temperature (the last one); such weights are
        refused with one line instead of Keras' count mismatch.
        """
        if self._saved_before_temperature(store):
            raise ValueError(
                f"The weights of `{type(self).__name__}` layer "
                f"{self.name!r} were saved by keras_caps 0.1.0 before "
                "routers had a temperature (every variable but "
                f"`temperature`); {_NOT_LOADED}")
        super().load_own_variables(store)

    def _saved_before_temperature(self, store):
        """Whether `store` holds this router's own variables but the last,
        its temperature, as a router of keras_caps 0.1.0 saved them."""
        own = self._trainable_variables + self._non_trainable_variables
        if (not self.keys_since_contract or not own
                or own[-1] is not self._temperature
                or len(store.keys()) != len(own) - 1):
            return False
        saved = [store[f"{index}"] for index in range(len(own) - 1)]
        return _shapes_match(saved, own[:-1])

    # --- Cost ------------------------------------------------------------

    def multiply_adds(self, input_shape):
        """Multiply–adds of routing one example, counted from shapes.

        The convention, the same for every router: each product of two
        numbers summed into a contraction (a vote matrix times a pose, an
        agreement dot product, a weighted sum over the children) counts
        as one multiply–add; elementwise work (softmax, squash, LayerNorm,
        logistic, log-likelihood normalisers, bias additions, activation
        scaling) counts nothing. The count follows the router's
        equations as its paper writes them (votes built, keys built),
        whatever shortcut the implementation takes, so it is a property of
        the method, not of a backend.

        Args:
            input_shape: The layer's input shape, batch first (the batch
                size is ignored).

        Returns:
            int. Multiply–adds per example.
        """
        raise NotImplementedError(
            f"`{type(self).__name__}` does not implement `multiply_adds`: "
            "give it the count of its equations (see `Router.multiply_adds`"
            ").")

    def _child_parent_pairs(self, input_shape):
        """Children times parents, over every output position."""
        shape = self.compute_couplings_shape(input_shape)
        return int(shape[2]) * int(shape[3])


def _check_seed(seed):
    if seed is None:
        return None
    if (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
            or seed < 0):
        raise ValueError(
            "Received an invalid value for `seed`, expected None or a "
            f"non-negative integer. Received: seed={seed!r}")
    return int(seed)


def _check_saved_since_contract(cls, config):
    """Raises a one-line `ValueError` for a router config of keras_caps
    0.1.0 saved before the router contract (see `from_config`)."""
    missing = [key for key in cls.keys_since_contract if key not in config]
    layout = config.get("couplings_layout", COUPLINGS_LAYOUT)
    if missing:
        named = [f"`{key}`" for key in missing]
        evidence = (f"no {named[0]}" if len(named) == 1 else
                    f"neither {', '.join(named[:-1])} nor {named[-1]}")
    elif layout != COUPLINGS_LAYOUT:
        evidence = (f"`couplings_layout={layout!r}`, the layout of such a "
                    "file")
    else:
        return
    raise ValueError(
        f"The `{cls.__name__}` layer {config.get('name')!r} was saved by "
        "keras_caps 0.1.0 before the router contract (its config has "
        f"{evidence}); {_NOT_LOADED}")


def _shapes_match(values, variables):
    if len(values) != len(variables):
        return False
    return all(tuple(value.shape) == tuple(variable.shape)
               for value, variable in zip(values, variables))


def _shape_of(inputs):
    if isinstance(inputs, (list, tuple)):
        return [tuple(tensor.shape) for tensor in inputs]
    return tuple(inputs.shape)
