import keras
import numpy as np

from keras_caps.api_export import keras_caps_export
from keras_caps.diagnostics import diagnosable_routers
from keras_caps.diagnostics import routing_layer_diagnostics


@keras_caps_export("keras_caps.callbacks.RoutingDiagnostics")
class RoutingDiagnostics(keras.callbacks.Callback):
    """Logs routing diagnostics for a fixed batch at the end of each epoch.

    At the end of every epoch the callback runs the model on `inputs` up
    to each routing layer, computes
    `keras_caps.diagnostics.routing_layer_diagnostics` and adds to the
    epoch's logs, for each routing layer `<layer>`:

    - `routing_<layer>_entropy`: the mean coupling entropy (nats);
    - `routing_<layer>_entropy_head_<k>`: the entropy of head `k` (one per
      head; several heads only for `AttentionRouting`), so head collapse
      shows as some heads falling far below the others;
    - `routing_<layer>_sparsity` and `routing_<layer>_sparsity_head_<k>`:
      the share of couplings that are exactly zero (sparse or one-hot
      couplings, e.g. `coupling="sparsemax"`), overall and per head;
    - `routing_<layer>_top3_concentration`: the share of a parent's
      coupling mass on its top-3 children, mean over the parents;
    - `routing_<layer>_geometric_agreement_<t>`: `L_geo` of routing pass
      `t = 1, 2, ...` (for routers whose trace has votes).

    The routers are checked when training begins: a model without a
    router in its own graph, or a `layer_names` entry that is not one,
    fails then, not after the first epoch.

    Callbacks see the same logs in list order: put this one before
    `keras.callbacks.CSVLogger` and `keras.callbacks.TensorBoard` so they
    record its values.

    Args:
        inputs: A fixed batch for the model's image input (its `"image"`
            input, or its first); raw pixels for the applications.
        layer_names: list of str. Routing layers to watch. Defaults to
            `None`: every one `routing_layer_diagnostics` finds.
        prefix: str. Prefix of the log keys. Defaults to `"routing"`.

    Example:

    >>> images = np.random.uniform(0, 255, (8, 28, 28, 1))
    >>> callbacks = [keras_caps.callbacks.RoutingDiagnostics(images[:4]),
    ...              keras.callbacks.CSVLogger("history.csv")]
    """

    def __init__(self, inputs, layer_names=None, prefix="routing"):
        super().__init__()
        if layer_names is not None:
            if isinstance(layer_names, str):
                layer_names = [layer_names]
            if not all(isinstance(name, str) for name in layer_names):
                raise TypeError(
                    "Received an invalid type for `layer_names`, expected "
                    "None or a list of layer names. Received: "
                    f"layer_names={layer_names!r}")
            layer_names = list(layer_names)
        if not isinstance(prefix, str):
            raise TypeError(
                "Received an invalid type for `prefix`, expected a str. "
                f"Received: prefix={prefix!r} of type "
                f"{type(prefix).__name__}")
        self.inputs = np.asarray(inputs, dtype="float32")
        self.layer_names = layer_names
        self.prefix = prefix

    def on_train_begin(self, logs=None):
        diagnosable_routers(self.model, self.layer_names)

    def diagnostics(self):
        """The values logged now: dict from log key to float."""
        found = routing_layer_diagnostics(self.model, self.inputs,
                                          self.layer_names)
        values = {}
        for layer, numbers in found.items():
            key = f"{self.prefix}_{layer}"
            values[f"{key}_entropy"] = float(numbers["entropy"])
            for head, entropy in enumerate(numbers["entropy_per_head"]):
                values[f"{key}_entropy_head_{head}"] = float(entropy)
            values[f"{key}_sparsity"] = float(numbers["sparsity"])
            for head, share in enumerate(numbers["sparsity_per_head"]):
                values[f"{key}_sparsity_head_{head}"] = float(share)
            values[f"{key}_top3_concentration"] = float(
                np.mean(numbers["top3_concentration"]))
            for step, value in enumerate(
                    numbers.get("geometric_agreement", ()), start=1):
                values[f"{key}_geometric_agreement_{step}"] = float(value)
        return values

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        logs.update(self.diagnostics())

    def get_config(self):
        """The arguments; the fixed batch as a nested list."""
        return {"inputs": np.asarray(self.inputs).tolist(),
                "layer_names": self.layer_names, "prefix": self.prefix}
