"""Raises the margin of a model's spread loss linearly over training."""

import keras

from keras_caps.api_export import keras_caps_export
from keras_caps.losses.spread_loss import SpreadLoss
from keras_caps.validation import check_number
from keras_caps.validation import check_positive_int

LOG_NAME = "spread_loss_margin"


def _spread_losses(loss):
    """The `SpreadLoss` objects in a compiled loss (nested dicts, lists)."""
    if isinstance(loss, SpreadLoss):
        return [loss]
    if isinstance(loss, dict):
        loss = list(loss.values())
    if isinstance(loss, (list, tuple)):
        return [found for item in loss for found in _spread_losses(item)]
    return []


@keras_caps_export("keras_caps.callbacks.SpreadLossMarginSchedule")
class SpreadLossMarginSchedule(keras.callbacks.Callback):
    """Raises the spread-loss margin linearly from 0.2 to 0.9 over training.

    Hinton, Sabour & Frosst (2018, §3.1) start the margin of the spread
    loss at 0.2 and increase it linearly during training to 0.9, which
    keeps dead capsules in the upper layers from blocking learning early
    on. The paper gives no finer shape; this callback moves the margin in
    equal steps once per epoch, at the start of epoch `e` (from 0):

    ```
    m(e) = initial + (final - initial) * min(1, e / (ramp_epochs - 1))
    ```

    so the first epoch trains with `initial` and epoch `ramp_epochs` (and
    every later one) with `final`. Epochs count from `fit`'s epoch index,
    so a resumed run (`initial_epoch`) continues its schedule. Per epoch
    rather than per step, because a compiled JAX step reads the margin as
    a constant: on JAX the callback rebuilds the training step whenever
    the margin changes, once per epoch; TensorFlow and PyTorch read the
    margin variable and are not retraced.

    The callback sets every `keras_caps.losses.SpreadLoss` the model was
    compiled with (also inside dicts and lists of losses) and writes the
    epoch's margin to the logs as `spread_loss_margin`: put it before
    `CSVLogger` and `TensorBoard`.

    Args:
        initial_margin: float. The margin of the first epoch. Defaults to
            `0.2`.
        final_margin: float. The margin at the end of the ramp, at least
            `initial_margin`. Defaults to `0.9`.
        ramp_epochs: int or `None`. The epoch count over which the margin
            rises. Defaults to `None`: the `epochs` of `fit`.

    Example:

    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.Dense(3, "sigmoid")(inputs))
    >>> model.compile("sgd", loss=keras_caps.losses.SpreadLoss())
    >>> schedule = keras_caps.callbacks.SpreadLossMarginSchedule()
    >>> history = model.fit(np.ones((4, 4)), np.array([0, 1, 2, 0]),
    ...                     epochs=3, verbose=0, callbacks=[schedule])
    >>> [round(m, 2) for m in history.history["spread_loss_margin"]]
    [0.2, 0.55, 0.9]

    Reference:
    - [Hinton, Sabour & Frosst, 2018](https://openreview.net/forum?id=HJWLfGWRb)
    """

    def __init__(self, initial_margin=0.2, final_margin=0.9,
                 ramp_epochs=None):
        super().__init__()
        self.initial_margin = check_number("initial_margin", initial_margin,
                                           minimum=0.0)
        self.final_margin = check_number("final_margin", final_margin,
                                         minimum=self.initial_margin)
        self.ramp_epochs = (None if ramp_epochs is None else
                            check_positive_int("ramp_epochs", ramp_epochs))
        self._losses = []
        self._margin = None

    def margin(self, epoch, ramp_epochs):
        """The margin of epoch `epoch` (from 0) for a ramp of that length."""
        progress = min(1.0, epoch / max(1, ramp_epochs - 1))
        return self.initial_margin + progress * (
            self.final_margin - self.initial_margin)

    def on_train_begin(self, logs=None):
        self._losses = _spread_losses(getattr(self.model, "loss", None))
        if not self._losses:
            raise ValueError(
                f"`{type(self).__name__}` needs a model compiled with "
                "`keras_caps.losses.SpreadLoss`. Received: model "
                f"{self.model.name!r} compiled with "
                f"loss={getattr(self.model, 'loss', None)!r}")
        self._margin = None

    def on_epoch_begin(self, epoch, logs=None):
        ramp = self.ramp_epochs or self.params.get("epochs") or 1
        margin = self.margin(epoch, ramp)
        if margin == self._margin:
            return
        for loss in self._losses:
            loss.margin = margin
        if keras.backend.backend() == "jax":
            # A compiled JAX step holds the margin it was traced with as a
            # constant; a new step traces on its first call.
            self.model.make_train_function(force=True)
        self._margin = margin

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None and self._margin is not None:
            logs[LOG_NAME] = self._margin

    def get_config(self):
        return {"initial_margin": self.initial_margin,
                "final_margin": self.final_margin,
                "ramp_epochs": self.ramp_epochs}
